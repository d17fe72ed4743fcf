#include "transport/shm/shm_path.h"

#include <chrono>
#include <cstring>
#include <new>
#include <string>

#include "tdist/errors.h"
#include "transport/data_path_registry.h"
#include "util/settings.h"
#include "util/logging.h"
#include "util/socket.h"

namespace tdist {

namespace {
constexpr size_t kHeaderBytes = sizeof(wire::MessageHeader);

std::exception_ptr bad_header(const std::string& peer, const wire::MessageHeader& h) {
  return std::make_exception_ptr(DistNetworkError("protocol error from " + peer +
                                                  ": bad message header in the shared-memory ring (magic " +
                                                  std::to_string(h.magic) + ", size " + std::to_string(h.size) + ")"));
}
}  // namespace

void ShmLink::init_controls(ShmSegment& seg, size_t ring_bytes) {
  char* base = static_cast<char*>(seg.data());
  new (base) ShmRingControl();
  new (base + sizeof(ShmRingControl)) ShmRingControl();
  new (base + single_copy_offset(ring_bytes)) SingleCopyControl();
  new (base + single_copy_offset(ring_bytes) + sizeof(SingleCopyControl)) SingleCopyControl();
  new (base + single_copy_offset(ring_bytes) + 2 * sizeof(SingleCopyControl)) SingleCopyVerdicts();
}

ShmLink::ShmLink(ShmSegment seg, size_t ring_bytes, bool low) : segment(std::move(seg)), is_low(low) {
  char* base = static_cast<char*>(segment.data());
  auto* low_to_high = std::launder(reinterpret_cast<ShmRingControl*>(base));
  auto* high_to_low = std::launder(reinterpret_cast<ShmRingControl*>(base + sizeof(ShmRingControl)));
  char* data_lh = base + 2 * sizeof(ShmRingControl);
  char* data_hl = data_lh + ring_bytes;
  ShmRing lh(low_to_high, data_lh, ring_bytes), hl(high_to_low, data_hl, ring_bytes);
  tx = is_low ? lh : hl;
  rx = is_low ? hl : lh;
  auto* single_lh = std::launder(reinterpret_cast<SingleCopyControl*>(base + single_copy_offset(ring_bytes)));
  auto* single_hl = std::launder(
      reinterpret_cast<SingleCopyControl*>(base + single_copy_offset(ring_bytes) + sizeof(SingleCopyControl)));
  single_tx = is_low ? single_lh : single_hl;
  single_rx = is_low ? single_hl : single_lh;
  verdicts = std::launder(
      reinterpret_cast<SingleCopyVerdicts*>(base + single_copy_offset(ring_bytes) + 2 * sizeof(SingleCopyControl)));
}

void ShmLink::verify(const std::string& label, const std::string& peer_name) {
  uint32_t none = 0;
  if (!verdict.compare_exchange_strong(none, 3, std::memory_order_acq_rel)) return;
  std::string why = "the peer does not take part";
  if (is_low || verdicts->low.load(std::memory_order_acquire) == 1) why = probe_single_copy(peer, nonce_given);
  if (!why.empty() && peer.pid > 0)
    TDIST_LOG(LogLevel::Info, label << ": large messages to and from " << peer_name
                                    << " go through the ring, not in one copy: " << why);
  const uint32_t v = why.empty() ? 1 : 2;
  verdict.store(v, std::memory_order_release);
  (is_low ? verdicts->low : verdicts->high).store(v, std::memory_order_release);
}

// The registry holds its default and range (4 KiB to 1 GiB).
size_t shm_ring_bytes() { return static_cast<size_t>(settings::get<"TDIST_SHM_RING_BYTES">()); }

// Three phases so that no rank waits on one that waits on it: offer to every
// higher peer, answer every lower one, then read the answers.
std::vector<std::unique_ptr<ShmLink>> connect_shm_links(int rank, const std::vector<ShmCandidate>& candidates,
                                                        bool enabled, Deadline deadline, const std::string& label) {
  const size_t ring_bytes = shm_ring_bytes();
  // Large messages in one copy: each end tells the other who it is and a
  // nonce to keep, and checks the other (ShmLink::verify).
  const bool single_copy = enabled && settings::get<"TDIST_SHM_P2P_SINGLE_COPY_BYTES">() > 0;
  auto identity = [&](std::atomic<uint64_t>* word) {
    return single_copy ? single_copy_identity(*word) : SingleCopyIdentity{};
  };
  std::vector<std::unique_ptr<ShmLink>> links(candidates.size());
  std::vector<ShmSegment> offered(candidates.size());
  std::vector<std::atomic<uint64_t>*> offered_words(candidates.size());
  std::vector<uint64_t> offered_nonces(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ShmCandidate& c = candidates[i];
    if (c.peer < rank) continue;
    std::string name;
    if (enabled) {
      try {
        offered[i] = ShmSegment::create("p2p", ShmLink::segment_bytes(ring_bytes));
        ShmLink::init_controls(offered[i], ring_bytes);
        name = offered[i].name();
      } catch (const DistError& e) {
        TDIST_LOG(LogLevel::Warn, label << ": no shared memory with " << c.name << ": " << e.what());
      }
    }
    offered_words[i] = single_copy ? new_probe_word() : nullptr;
    const SingleCopyIdentity me = identity(offered_words[i]);
    offered_nonces[i] = me.nonce;
    wire::ShmOffer offer{
        wire::kShmOfferMagic, static_cast<uint32_t>(name.size()), ring_bytes, me.pid, 0, me.pid_ns, me.probe, me.nonce};
    send_all(c.fd, &offer, sizeof(offer), deadline, c.name);
    if (!name.empty()) send_all(c.fd, name.data(), name.size(), deadline, c.name);
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ShmCandidate& c = candidates[i];
    if (c.peer > rank) continue;
    wire::ShmOffer offer{};
    recv_all(c.fd, &offer, sizeof(offer), deadline, c.name);
    if (offer.magic != wire::kShmOfferMagic || offer.name_size > wire::kMaxShmName || offer.ring_bytes < 4096 ||
        offer.ring_bytes > (uint64_t{1} << 30))
      throw DistNetworkError(label + ": protocol error from " + c.name + ": bad shared-memory offer");
    std::string name(offer.name_size, '\0');
    if (!name.empty()) recv_all(c.fd, name.data(), name.size(), deadline, c.name);
    uint32_t accepted = 0;
    if (enabled && !name.empty()) {
      try {
        ShmSegment seg = ShmSegment::open(name, ShmLink::segment_bytes(offer.ring_bytes));
        // Both ends have it mapped now: the name goes even if its creator dies before it reads the reply.
        seg.remove_name();
        links[i] = std::make_unique<ShmLink>(std::move(seg), offer.ring_bytes, /*is_low=*/false);
        accepted = 1;
      } catch (const DistError& e) {
        TDIST_LOG(LogLevel::Warn, label << ": no shared memory with " << c.name << ": " << e.what());
      }
    }
    SingleCopyIdentity me;
    if (links[i]) {
      ShmLink& link = *links[i];
      // The peer's nonce is in place before the reply lets the peer look for it.
      link.peer = SingleCopyIdentity{offer.pid, offer.pid_ns, offer.probe, offer.nonce};
      if (single_copy) {
        link.probe_word = new_probe_word();
        link.probe_word->store(offer.nonce, std::memory_order_relaxed);
      }
      me = identity(link.probe_word);
      link.nonce_given = me.nonce;
    }
    wire::ShmReply reply{wire::kShmReplyMagic, accepted, me.pid, 0, me.pid_ns, me.probe, me.nonce};
    send_all(c.fd, &reply, sizeof(reply), deadline, c.name);
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ShmCandidate& c = candidates[i];
    if (c.peer < rank) continue;
    wire::ShmReply reply{};
    recv_all(c.fd, &reply, sizeof(reply), deadline, c.name);
    if (reply.magic != wire::kShmReplyMagic)
      throw DistNetworkError(label + ": protocol error from " + c.name + ": bad shared-memory reply");
    if (reply.accepted == 1 && offered[i].valid()) {
      offered[i].unlink();  // both sides mapped it: nothing stays in /dev/shm
      links[i] = std::make_unique<ShmLink>(std::move(offered[i]), ring_bytes, /*is_low=*/true);
      ShmLink& link = *links[i];
      link.peer = SingleCopyIdentity{reply.pid, reply.pid_ns, reply.probe, reply.nonce};
      link.probe_word = offered_words[i];
      // The peer's nonce is in place before this rank's verdict lets the peer look for it.
      if (link.probe_word) link.probe_word->store(reply.nonce, std::memory_order_relaxed);
      link.nonce_given = offered_nonces[i];
      link.verify(label, c.name);
    }
  }
  return links;
}

// "shm" in TDIST_TRANSPORTS: the rings reach the peers of this host. The
// pair's set-up still declines at either end that cannot map a segment, so
// both ends then fall back alike.
namespace {
[[maybe_unused]] const bool kShmRegistered = [] {
  register_data_path(
      "shm", DataPathFactory{
                 "shared memory",
                 [](const SetupChannel& channel) { return channel.same_host(); },
                 [](SetupChannel& channel, PathHost& host, Deadline deadline) -> std::unique_ptr<DataPath> {
                   std::vector<ShmCandidate> candidates{ShmCandidate{channel.peer(), channel.fd(), channel.peer_name()}};
                   auto link = std::move(
                       connect_shm_links(channel.rank(), candidates, /*enabled=*/true, deadline, channel.label()).front());
                   if (!link) return nullptr;
                   return std::make_unique<ShmPath>(std::move(link), host, channel.peer());
                 },
                 [] { return shm_enabled() ? std::string() : std::string("TDIST_SHM=0"); },
             });
  return true;
}();
}  // namespace

ShmPath::ShmPath(std::unique_ptr<ShmLink> link, PathHost& host, int peer)
    : link_(std::move(link)), host_(host), peer_(peer),
      single_copy_bytes_(static_cast<size_t>(settings::get<"TDIST_SHM_P2P_SINGLE_COPY_BYTES">())) {}

bool ShmPath::use_single_copy(size_t bytes) {
  if (single_copy_bytes_ == 0 || bytes < single_copy_bytes_) return false;
  if (link_->verdict_due()) link_->verify("shared-memory path", host_.describe_peer(peer_));
  return link_->single_copy_agreed();
}

// With nothing queued before it and room for all of it, the message is
// written at once and the request completes here: no queue entry, and up to
// a piece of payload (ShmRing::piece_for) one release of the ring's head,
// header and payload together, for the reader to see.
void ShmPath::post_locked(std::shared_ptr<Request> req) {
  ShmRing& ring = link_->tx;
  if (use_single_copy(req->size())) {
    const wire::MessageHeader header{wire::kShmSingleCopyMagic, 0, req->tag(), req->size(), req->comm()};
    txq_.push_back(Outgoing{header, std::move(req), 0, true});
    flush_locked();
    while (!txq_.empty() && may_announce() && ring.writer_prepare_sleep()) flush_locked();
    return;
  }
  const wire::MessageHeader header{wire::kMessageMagic, 0, req->tag(), req->size(), req->comm()};
  if (txq_.empty() && ring.write_both(&header, sizeof(header), req->data(), req->size())) {
    if (ring.reader_needs_doorbell()) host_.doorbell_locked(peer_);
    req->complete_unshared(peer_);
    return;
  }
  txq_.push_back(Outgoing{header, std::move(req), 0});
  flush_locked();
  // What is left waits for room. Whoever drives flushes it (it polls and sees
  // the backlog); one that sleeps in epoll meanwhile is woken by the reader's
  // doorbell once it makes room, which the raised flag asks for.
  while (!txq_.empty() && may_announce() && ring.writer_prepare_sleep()) flush_locked();
}

void ShmPath::flush_locked() {
  ShmRing& ring = link_->tx;
  bool wrote = false;
  if (!announced_.empty()) serve_single_copies_locked();
  while (!txq_.empty()) {
    auto& item = txq_.front();
    if (item.single_copy) {
      // The slot is set up before the header that names it is published (the
      // ring's release); the header goes whole or not at all.
      if (!may_announce()) break;
      SingleCopySlot& slot = tx_slot(announced_sent_);
      slot.src.store(reinterpret_cast<uintptr_t>(item.request->data()), std::memory_order_relaxed);
      slot.dst.store(0, std::memory_order_relaxed);
      slot.split.store(0, std::memory_order_relaxed);
      slot.src_state.store(kSrcPosted, std::memory_order_relaxed);
      slot.dst_state.store(kDstUnanswered, std::memory_order_relaxed);
      static const char kNoPayload = 0;
      if (!ring.write_both(&item.header, kHeaderBytes, &kNoPayload, 0)) break;
      wrote = true;
      announced_.push_back(Announced{std::move(item.request), announced_sent_++, nullptr});
      txq_.pop_front();
      continue;
    }
    if (item.sent < kHeaderBytes) {
      size_t k = ring.write_some(reinterpret_cast<char*>(&item.header) + item.sent, kHeaderBytes - item.sent);
      item.sent += k;
      wrote = wrote || k > 0;
      if (item.sent < kHeaderBytes) break;
    }
    size_t off = item.sent - kHeaderBytes, left = item.request->size() - off;
    if (left > 0) {
      size_t k = ring.write_some(static_cast<char*>(item.request->data()) + off, left);
      item.sent += k;
      wrote = wrote || k > 0;
      if (k < left) break;
    }
    item.request->complete(nullptr, peer_);
    txq_.pop_front();
  }
  backlog_.store(!txq_.empty() || !announced_.empty(), std::memory_order_relaxed);
  if (wrote && ring.reader_needs_doorbell()) host_.doorbell_locked(peer_);
}

void ShmPath::fail_sends_locked(const std::exception_ptr& error) {
  for (auto& item : txq_) item.request->complete(error, peer_);
  txq_.clear();
  // The pair is done with: no slot is used again.
  for (auto& a : announced_) withdraw_locked(a, error);
  announced_.clear();
  backlog_.store(false, std::memory_order_relaxed);
}

void ShmPath::abandon_sends_locked(uint32_t comm, const std::exception_ptr& error) {
  for (auto it = txq_.begin(); it != txq_.end();) {
    const std::shared_ptr<Request> original = it->request;  // alive until completed below
    Request& r = *original;
    if (r.comm() != comm) {  // another group's, or a copy made here before
      ++it;
      continue;
    }
    if (it->sent == 0) {  // an unannounced single copy too
      r.complete(error, peer_);
      it = txq_.erase(it);
      continue;
    }
    // The ring holds its header and part of its payload: the rest must follow.
    const size_t done = it->sent > kHeaderBytes ? it->sent - kHeaderBytes : 0;
    auto rest = owned_send(peer_, r.tag(), r.size());
    if (r.size() > done) std::memcpy(static_cast<char*>(rest->data()) + done, static_cast<char*>(r.data()) + done, r.size() - done);
    it->request = std::move(rest);
    r.complete(error, peer_);
    ++it;
  }
  // Announced ones keep their slots until the receiver is done with them.
  for (auto& a : announced_)
    if (a.request && a.request->comm() == comm) withdraw_locked(a, error);
  backlog_.store(!txq_.empty() || !announced_.empty(), std::memory_order_relaxed);
}

bool ShmPath::prepare_sleep_locked() {
  if (!announced_.empty()) {
    link_->single_tx->sender_waits.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (const auto& a : announced_) {
      SingleCopySlot& slot = tx_slot(a.number);
      if (slot.dst_state.load(std::memory_order_acquire) == kDstWanted ||
          slot.src_state.load(std::memory_order_acquire) == kSrcDone)
        return true;
    }
  }
  return !txq_.empty() && may_announce() && link_->tx.writer_prepare_sleep();
}

// Consumes what the ring holds: headers and payloads are copied straight from
// the ring to their place.
bool ShmPath::poll() {
  if (broken_) return false;
  ShmRing& ring = link_->rx;
  if (owe_doorbell_) {
    owe_doorbell_ = false;
    host_.doorbell(peer_);
  }
  // The higher rank checks its peer as soon as the lower one has, so that
  // neither waits for a large message of its own to learn whether it may.
  if (single_copy_bytes_ > 0 && link_->verdict_due())
    link_->verify("shared-memory path", host_.describe_peer(peer_));
  bool consumed = !splitting_.empty() && settle_splitting();
  // Nothing after a parked announcement is read before it: messages of one
  // sender are matched in the order sent.
  if (parked_ && !receive_single_copy()) return consumed;
  if (!in_payload_) ring.prefetch_next();
  for (;;) {
    size_t avail = ring.available();
    if (!in_payload_) {
      if (avail < kHeaderBytes) break;
      ring.read(&header_, kHeaderBytes);
      consumed = true;
      // Only from a peer this rank verified (ShmLink::verify): anything else
      // is a bad header, whatever the segment says.
      if (header_.magic == wire::kShmSingleCopyMagic && header_.size <= wire::kMaxUnexpectedBytes &&
          link_->verdict.load(std::memory_order_acquire) == 1) {
        parked_ = true;
        parked_since_ = std::chrono::steady_clock::now();
        if (!receive_single_copy()) break;
        continue;
      }
      if (header_.magic != wire::kMessageMagic || header_.size > wire::kMaxUnexpectedBytes) {
        broken_ = true;
        host_.path_failed(peer_, bad_header(host_.describe_peer(peer_), header_));
        return true;
      }
      in_payload_ = true;
      payload_done_ = 0;
      dst_ = host_.begin_message(peer_, header_, rx_slot_);
    } else {
      size_t take = std::min<size_t>(avail, header_.size - payload_done_);
      if (take == 0 && payload_done_ < header_.size) break;
      ring.read(dst_ ? dst_ + payload_done_ : nullptr, take);
      consumed = consumed || take > 0;
      payload_done_ += take;
    }
    if (in_payload_ && payload_done_ == header_.size) {
      in_payload_ = false;
      dst_ = nullptr;
      host_.end_message(peer_, rx_slot_);
    }
  }
  if (consumed && ring.writer_needs_doorbell()) host_.doorbell(peer_);
  return consumed;
}

bool ShmPath::prepare_sleep() {
  if (parked_) return true;  // it is taken or read whole soon: keep polling
  if (!splitting_.empty()) {
    link_->single_rx->receiver_waits.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (const auto& s : splitting_) {
      const uint32_t state = rx_slot(s.number).dst_state.load(std::memory_order_acquire);
      if (state != kDstWanted && state != kDstWriting) return true;
    }
  }
  return link_->rx.reader_prepare_sleep();
}

}  // namespace tdist
