#include "transport/matching.h"

#include <cstring>

#include "tdist/errors.h"
#include "transport/transport.h"
#include "util/logging.h"

namespace tdist {

Matching::Matching(int rank, int size, MatchingNames names)
    : rank_(rank), size_(size), names_(std::move(names)), lost_(static_cast<size_t>(size)) {}

// The first posted receive that a message from `peer` with `tag` matches,
// taken off the list; null when none. A receive of another size is failed
// at once (the message is then discarded).
std::shared_ptr<Request> Matching::take_posted_locked(int peer, uint32_t comm, uint64_t tag, size_t size, bool& fits) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    auto& r = **it;
    if (r.tag() != tag || r.comm() != comm || (r.link_peer() != kAnySender && r.link_peer() != peer)) continue;
    auto req = std::move(*it);
    if (it == posted_.begin())
      posted_.pop_front();  // nearly always: receives match in the order posted
    else
      posted_.erase(it);
    fits = req->size() == size;
    if (!fits) req->complete(size_mismatch(peer, tag, req->size(), size), peer);
    return req;
  }
  return nullptr;
}

std::shared_ptr<BufferedMessage> Matching::buffer_locked(int peer, uint32_t comm, uint64_t tag, size_t size,
                                                         size_t bytes) {
  auto entry = std::make_shared<BufferedMessage>();
  entry->peer = peer;
  entry->comm = comm;
  entry->tag = tag;
  entry->size = size;
  entry->data = payload_pool_.take(bytes);
  buffered_.push_back(entry);
  return entry;
}

char* Matching::begin_message(int peer, const wire::MessageHeader& header, MessageSlot& slot) {
  const uint64_t tag = header.tag;
  const uint32_t comm = header.comm;
  const size_t size = header.size;
  std::lock_guard<std::mutex> lock(mu_);
  bool fits = false;
  if (auto req = take_posted_locked(peer, comm, tag, size, fits)) {
    if (!fits) return nullptr;  // it failed on a size mismatch: discard the payload
    char* dst = static_cast<char*>(req->data());
    slot.request = std::move(req);
    return dst;
  }
  // A late message of a destroyed group: nobody will receive it.
  if (comm_closed_locked(comm)) return nullptr;
  fail_out_of_step_locked(peer, comm, tag);
  try {
    auto entry = buffer_locked(peer, comm, tag, size, size);
    char* dst = entry->data.data();
    slot.buffered = std::move(entry);
    return dst;
  } catch (const std::bad_alloc&) {
    // Cannot buffer it: discard the payload and fail whoever expects it.
    TDIST_LOG(LogLevel::Error, names_.label << ": cannot buffer " << size << " bytes from " << describe_peer(peer));
    return nullptr;
  }
}

char* Matching::begin_posted_message(int peer, const wire::MessageHeader& header, MessageSlot& slot, bool& waiting) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting = false;
  bool fits = false;
  if (auto req = take_posted_locked(peer, header.comm, header.tag, header.size, fits)) {
    if (!fits) return nullptr;
    char* dst = static_cast<char*>(req->data());
    slot.request = std::move(req);
    return dst;
  }
  waiting = !comm_closed_locked(header.comm);
  return nullptr;
}

// Receives waiting on this peer for another operation will never be served.
void Matching::fail_out_of_step_locked(int peer, uint32_t comm, uint64_t arrived_tag) {
  for (auto it = posted_.begin(); it != posted_.end();) {
    std::exception_ptr err = (*it)->link_peer() == peer && (*it)->comm() == comm
                                 ? out_of_step(peer, (*it)->tag(), arrived_tag)
                                 : nullptr;
    if (err) {
      (*it)->complete(err, peer);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
}

void Matching::end_message(int peer, MessageSlot& slot) {
  if (auto req = std::move(slot.request)) {
    slot.request.reset();
    req->complete(nullptr, peer);
    return;
  }
  if (auto entry = std::move(slot.buffered)) {
    slot.buffered.reset();
    std::lock_guard<std::mutex> lock(mu_);
    entry->complete = true;
    if (entry->waiter) {
      if (entry->size > 0) std::memcpy(entry->waiter->data(), entry->data.data(), entry->size);
      payload_pool_.give(std::move(entry->data));
      entry->waiter->complete(nullptr, peer);
      entry->waiter.reset();
    }
  }
}

Matching::Served Matching::match_buffered_locked(const std::shared_ptr<Request>& req,
                                                 std::shared_ptr<BufferedMessage>& announced) {
  const int peer = req->link_peer();
  const uint32_t comm = req->comm();
  const uint64_t tag = req->tag();
  const size_t size = req->size();
  void* data = req->data();
  if (aborted_) {
    req->complete(aborted_, peer);
    return Served::Done;
  }
  if (any_left_.load(std::memory_order_relaxed) && !aborted_comms_.empty())
    if (auto it = aborted_comms_.find(comm); it != aborted_comms_.end()) {
      req->complete(it->second, peer);
      return Served::Done;
    }
  for (auto it = buffered_.begin(); it != buffered_.end(); ++it) {
    auto& u = **it;
    // A message from this peer for another operation arrived first: since a
    // peer's messages arrive in order, it was sent for an operation this rank
    // did not call alike, even when the one awaited here is in too.
    if (u.comm != comm) continue;
    if (u.peer == peer && u.tag != tag) {
      if (auto err = out_of_step(peer, tag, u.tag)) {
        req->complete(err, peer);
        return Served::Done;
      }
      continue;
    }
    if (u.tag != tag || (peer != kAnySender && u.peer != peer)) continue;
    auto entry = *it;
    buffered_.erase(it);
    if (entry->rendezvous) {
      // The sender waits for the mesh's clear-to-send, which also checks the size.
      announced = std::move(entry);
      return Served::Announced;
    }
    if (entry->size != size) {
      req->complete(size_mismatch(entry->peer, tag, size, entry->size), entry->peer);
    } else if (entry->complete) {
      if (size > 0) std::memcpy(data, entry->data.data(), size);
      payload_pool_.give(std::move(entry->data));
      req->complete(nullptr, entry->peer);
    } else {
      entry->matched = true;
      entry->waiter = req;
    }
    return Served::Done;
  }
  if (peer != kAnySender && peer != rank_ && lost_[static_cast<size_t>(peer)]) {
    req->complete(lost_[static_cast<size_t>(peer)], peer);
    return Served::Done;
  }
  // What the peer sent before it left was matched above; nothing more comes.
  if (peer != kAnySender && peer != rank_)
    if (auto left = left_error_locked(comm, peer)) {
      req->complete(left, peer);
      return Served::Done;
    }
  return Served::No;
}

void Matching::deliver_to_self(const std::shared_ptr<Request>& send) {
  wire::MessageHeader header{};
  header.tag = send->tag();
  header.size = send->size();
  header.comm = send->comm();
  MessageSlot slot;
  char* dst = begin_message(rank_, header, slot);
  if (dst && send->size() > 0) std::memcpy(dst, send->data(), send->size());
  end_message(rank_, slot);
  send->complete(nullptr, rank_);
}

bool Matching::abort_locked(std::exception_ptr cause) {
  if (aborted_) return false;
  aborted_ = std::move(cause);
  return true;
}

void Matching::fail_all_locked(const std::exception_ptr& cause) {
  for (auto& r : posted_) r->complete(cause, r->link_peer());
  posted_.clear();
  for (auto& u : buffered_)
    if (u->waiter) u->waiter->complete(cause, u->peer);
  buffered_.clear();
}

void Matching::peer_lost_locked(int peer, const std::exception_ptr& error) {
  auto& lost = lost_[static_cast<size_t>(peer)];
  if (!lost) ++lost_count_;
  lost = error;
  // A receive from anyone can still be served by the others (a peer that
  // finished and closed its group is normal); it fails only with the last peer.
  const bool all_lost = lost_count_ >= size_ - 1;
  for (auto it = posted_.begin(); it != posted_.end();) {
    if ((*it)->link_peer() == peer || ((*it)->link_peer() == kAnySender && all_lost)) {
      (*it)->complete(error, peer);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
  // What arrived whole stays for a receive, but not an announcement: the rest will not come.
  for (auto it = buffered_.begin(); it != buffered_.end();) {
    if ((*it)->peer == peer && (!(*it)->complete || (*it)->rendezvous)) it = buffered_.erase(it);
    else ++it;
  }
}

void Matching::link_lost_locked(int peer, const std::exception_ptr& error) {
  auto& lost = lost_[static_cast<size_t>(peer)];
  if (!lost) {
    ++lost_count_;
    lost = error;
  }
  for (auto it = posted_.begin(); it != posted_.end();) {
    if ((*it)->link_peer() == peer) {
      (*it)->complete(error, peer);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
}

std::exception_ptr Matching::any_peer_error_locked() const {
  for (auto& e : lost_)
    if (e) return e;
  return nullptr;
}

void Matching::comm_left_locked(uint32_t comm, int peer) {
  const auto error = std::make_exception_ptr(DistNetworkError(peer_left_text(describe_peer(peer), kLeftByDestroy)));
  left_comms_.insert({comm, peer});
  any_left_.store(true, std::memory_order_release);
  for (auto it = posted_.begin(); it != posted_.end();) {
    if ((*it)->comm() == comm && (*it)->link_peer() == peer) {
      (*it)->complete(error, peer);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
}

std::exception_ptr Matching::left_error_locked(uint32_t comm, int peer) const {
  if (!any_left_.load(std::memory_order_acquire)) return nullptr;
  if (auto it = aborted_comms_.find(comm); it != aborted_comms_.end()) return it->second;
  if (!left_comms_.count({comm, peer})) return nullptr;
  return std::make_exception_ptr(DistNetworkError(peer_left_text(describe_peer(peer), kLeftByDestroy)));
}

void Matching::close_comm_locked(uint32_t comm, const std::exception_ptr& cause,
                                 std::vector<std::shared_ptr<BufferedMessage>>& announced) {
  closed_comms_.insert(comm);
  for (auto it = posted_.begin(); it != posted_.end();) {
    if ((*it)->comm() == comm) {
      (*it)->complete(cause, (*it)->link_peer());
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
  // Buffered whole and unclaimed: freed. One still arriving is dropped when
  // it ends (end_message finds no waiter). An announcement goes to the mesh,
  // whose clear-to-send lets its sender finish (the data is dropped).
  for (auto it = buffered_.begin(); it != buffered_.end();) {
    auto& u = **it;
    if (u.comm == comm && !u.matched) {
      if (u.rendezvous) announced.push_back(*it);
      else if (u.complete) payload_pool_.give(std::move(u.data));
      it = buffered_.erase(it);
    } else {
      ++it;
    }
  }
}

void Matching::abort_comm_locked(uint32_t comm, const std::exception_ptr& cause,
                                 std::vector<std::shared_ptr<BufferedMessage>>& announced) {
  aborted_comms_.emplace(comm, cause);
  any_left_.store(true, std::memory_order_release);
  close_comm_locked(comm, cause, announced);
}

std::string Matching::describe_peer(int peer) const {
  return names_.describe_peer ? names_.describe_peer(peer) : "rank " + std::to_string(peer);
}

std::string Matching::tag_text(uint64_t tag) const {
  return names_.describe_tag ? names_.describe_tag(tag) : "tag " + std::to_string(tag);
}

std::exception_ptr Matching::size_mismatch(int peer, uint64_t tag, size_t posted, size_t arrived) const {
  return std::make_exception_ptr(DistBackendError(
      "message size mismatch with " + describe_peer(peer) + " in " + tag_text(tag) + ": expected " +
      std::to_string(posted) + " bytes, the peer sent " + std::to_string(arrived) +
      " bytes; the ranks called the operation with different sizes"));
}

std::exception_ptr Matching::out_of_step(int peer, uint64_t waiting_tag, uint64_t arrived_tag) const {
  if (!names_.desync) return nullptr;
  std::string why = names_.desync(waiting_tag, arrived_tag);
  if (why.empty()) return nullptr;
  return std::make_exception_ptr(DistBackendError(describe_peer(peer) + ": " + why));
}

}  // namespace tdist
