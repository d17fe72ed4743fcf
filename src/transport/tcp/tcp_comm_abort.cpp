// A communicator's abort over the shared connections (Mesh::abort_comm): the
// communicator fails alone. Its requests fail at once; a receive under way
// keeps reading its payload off the wire (a socket, an extra socket, a ring)
// but drops it, and a send under way finishes from a copy of what it has left
// to write: a frame cannot be cut off without breaking the pair's stream, so
// the connections, the other communicators and the peers' view of this rank
// (it neither gave up nor vanished) stay as they were. The members learn it
// from a notice (wire::kCommAbortMagic) and drop the communicator alike,
// naming this rank.
//
// Only the holder of rx_mu_ may redirect a receive under way, and a driving
// thread may hold it for as long as it waits: abort_comm queues the abort,
// wakes that thread through the rescan eventfd (it also looks every few rounds
// of its spin), and runs it itself whenever rx_mu_ is free.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>

#include "tdist/errors.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"

namespace tdist {

namespace {
// How often a thread waiting for its abort to be run looks again (the holder
// of rx_mu_ is woken at once; this only bounds a missed wake-up).
constexpr auto kCommAbortLook = std::chrono::milliseconds(1);
}  // namespace

void TcpTransport::abort_comm(uint32_t comm, std::exception_ptr cause) {
  if (stop_.load(std::memory_order_acquire)) return;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(comm_abort_mu_);
    comm_aborts_.push_back(CommAbort{comm, std::move(cause)});
    ticket = ++comm_aborts_queued_;
    comm_aborts_pending_.store(true, std::memory_order_release);
  }
  bool woken = false;
  for (;;) {
    if (rx_mu_.try_lock()) {
      std::lock_guard<std::mutex> rx(rx_mu_, std::adopt_lock);
      run_comm_aborts();
    }
    if (stop_.load(std::memory_order_acquire)) {
      // The mesh's abort fails everything; once the reader lets go of
      // rx_mu_ (it sees stop_ at once) nothing reads into a buffer.
      std::lock_guard<std::mutex> rx(rx_mu_);
      return;
    }
    std::unique_lock<std::mutex> lock(comm_abort_mu_);
    if (comm_aborts_done_ >= ticket) return;
    if (!woken && rescan_fd_.valid()) {
      uint64_t one = 1;
      [[maybe_unused]] ssize_t w = ::write(rescan_fd_.get(), &one, sizeof(one));
      woken = true;
    }
    comm_abort_cv_.wait_for(lock, kCommAbortLook, [&] { return comm_aborts_done_ >= ticket; });
    if (comm_aborts_done_ >= ticket) return;
  }
}

void TcpTransport::run_comm_aborts() {
  std::vector<CommAbort> todo;
  {
    std::lock_guard<std::mutex> lock(comm_abort_mu_);
    todo.swap(comm_aborts_);
    comm_aborts_pending_.store(false, std::memory_order_relaxed);
  }
  if (todo.empty()) return;
  for (const CommAbort& a : todo) drop_comm_locked(a.comm, a.cause);
  {
    std::lock_guard<std::mutex> lock(comm_abort_mu_);
    comm_aborts_done_ += todo.size();
  }
  comm_abort_cv_.notify_all();
}

void TcpTransport::drop_comm_locked(uint32_t comm, const std::exception_ptr& cause) {
  std::vector<std::shared_ptr<Unexpected>> announced;
  {
    std::lock_guard<std::mutex> lock(mu_);
    matching_.abort_comm_locked(comm, cause, announced);
    // A request may be reachable twice (an announced message's head and its
    // payload): each completes once, and is not touched after (its owner may
    // free it then).
    std::vector<std::shared_ptr<Request>> failed;
    auto ours = [comm](const std::shared_ptr<Request>& r) { return r && r->comm() == comm; };
    for (auto& peer : peers_) {
      if (!peer || !peer->connected.load(std::memory_order_acquire)) continue;
      Peer& p = *peer;
      // A message streaming in over the socket or the path: the rest of its payload is dropped.
      if (ours(p.rx.request)) {
        failed.push_back(std::move(p.rx.request));
        p.rx.request.reset();
        p.dst = nullptr;
      }
      if (p.path) p.path->fail_pending_receives_locked(&comm, cause);
      if (p.path && ours(p.path->incoming().request)) {
        failed.push_back(std::move(p.path->incoming().request));
        p.path->incoming().request.reset();
        p.path->discard_incoming();
      }
      for (MessageSlot* slot : {&p.rx, p.path ? &p.path->incoming() : nullptr})
        if (slot && slot->buffered && ours(slot->buffered->waiter)) {
          failed.push_back(std::move(slot->buffered->waiter));
          slot->buffered->waiter.reset();
        }
      // Cleared rendezvous payloads: their pieces still come, and are dropped.
      for (auto& [id, rx] : p.rendezvous_rx) {
        if (!ours(rx.request)) continue;
        failed.push_back(std::move(rx.request));
        rx.request.reset();
        if (p.in_payload && p.header.magic == wire::kRdvDataMagic && p.header.reserved == id) p.dst = nullptr;
        for (auto& lane : p.lanes)
          if (lane->in_piece && lane->header.reserved == id) lane->dst = nullptr;
      }
    }
    std::set<Request*> seen;
    for (auto& r : failed)
      if (seen.insert(r.get()).second) r->complete(cause, r->link_peer());
    discard_announced_locked(announced);
  }
  for (auto& entry : announced) send_clear_to_send(*peers_[entry->peer], entry->rendezvous_id);
  for (auto& peer : peers_) {
    if (!peer || !peer->connected.load(std::memory_order_acquire)) continue;
    std::lock_guard<std::mutex> tx(peer->tx_mu);
    abandon_sends_locked(*peer, comm, cause);
  }
}

// A message not begun is dropped (an announcement too: the peer never saw
// it). One begun, a piece of a payload the peer cleared (it waits for all of
// it), and an announced one the peer may clear any time, go from a copy.
void TcpTransport::abandon_sends_locked(Peer& p, uint32_t comm, const std::exception_ptr& cause) {
  if (p.tx_failed) return;
  if (p.path) {
    p.path->abandon_sends_locked(comm, cause);
    return;
  }
  constexpr size_t hsize = sizeof(wire::MessageHeader);
  std::unordered_map<Request*, std::shared_ptr<Request>> copies;  // an original -> its copy (comm 0)
  std::vector<std::shared_ptr<Request>> originals;                // to fail, once each
  auto copy_of = [&](const std::shared_ptr<Request>& r) -> const std::shared_ptr<Request>& {
    auto& c = copies[r.get()];
    if (!c) {
      c = owned_send(p.rank, r->tag(), r->size());
      originals.push_back(r);
    }
    return c;
  };
  // A message not begun has no other entry here (an announcement's is erased with it).

  auto copy_range = [](const Request& from, const Request& to, size_t begin, size_t end) {
    if (end > begin) std::memcpy(static_cast<char*>(to.data()) + begin, static_cast<char*>(from.data()) + begin, end - begin);
  };
  auto sweep = [&](std::deque<Peer::TxItem>& q) {
    for (auto it = q.begin(); it != q.end();) {
      if (!it->request || it->request->comm() != comm) {
        ++it;
        continue;
      }
      if (it->sent == 0 && it->header.magic != wire::kRdvDataMagic) {
        if (it->header.magic == wire::kRtsMagic) p.awaiting_cts.erase(it->header.reserved);
        originals.push_back(it->request);
        it = q.erase(it);
        continue;
      }
      const std::shared_ptr<Request>& copy = copy_of(it->request);
      const size_t done = it->sent > hsize ? it->sent - hsize : 0;
      copy_range(*it->request, *copy, it->offset + done, it->offset + it->length);
      it->request = copy;
      it->completes = false;
      it->pieces = nullptr;
      ++it;
    }
  };
  sweep(p.txq);
  for (auto& lane : p.lanes) sweep(lane->txq);
  for (auto& [id, r] : p.awaiting_cts) {
    if (r->comm() != comm) continue;
    const std::shared_ptr<Request>& copy = copy_of(r);
    copy_range(*r, *copy, wire::rendezvous_head(r->size()), r->size());
    r = copy;  // on_clear_to_send sends the rest from it
  }
  std::set<Request*> seen;
  for (auto& r : originals)
    if (seen.insert(r.get()).second) r->complete(cause, p.rank);
  update_output_locked(p);
}

void TcpTransport::tell_comm_aborted(uint32_t comm, const std::vector<int>& links, int group_rank,
                                     const std::string& group, const std::string& why) {
  if (stop_.load(std::memory_order_acquire)) return;
  const std::string text = (group + why).substr(0, wire::kMaxCommAbortText);
  const wire::MessageHeader h{wire::kCommAbortMagic, static_cast<uint32_t>(group_rank),
                              std::min<uint64_t>(group.size(), text.size()), text.size(), comm};
  send_comm_frame(links, h, text);
}

void TcpTransport::on_comm_aborted(Peer& p, const wire::MessageHeader& header, const std::string& text) {
  if (header.comm == 0) {  // the mesh itself is no communicator to abort
    fail_peer(p, std::make_exception_ptr(DistNetworkError("protocol error from " + describe_peer(p.rank) +
                                                          ": a communicator abort notice for communicator 0")));
    return;
  }
  const size_t name_bytes = std::min<size_t>(header.tag, text.size());
  const std::string group = text.substr(0, name_bytes), why = text.substr(name_bytes);
  // "rank 2 (group rank 1) at 10.0.0.2:4567 aborted group trainers: ..."
  std::string who = name_peer(p.rank);
  const int global = options_.global_ranks.size() == static_cast<size_t>(size_) ? options_.global_ranks[p.rank] : p.rank;
  if (header.reserved != static_cast<uint32_t>(global)) who += " (group rank " + std::to_string(header.reserved) + ")";
  who += " at " + p.address;
  drop_comm_locked(header.comm, std::make_exception_ptr(DistBackendError(
                                    who + " aborted group " + (group.empty() ? std::string("(unnamed)") : group) +
                                    ": " + why)));
}

}  // namespace tdist
