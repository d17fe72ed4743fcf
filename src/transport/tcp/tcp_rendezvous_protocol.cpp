// The rendezvous protocol of large socket messages (wire.h): the sender
// announces, the receiver clears once a receive matches, the payload then goes
// straight into that receive's buffer. Receive-side handlers run with rx_mu_
// held, like the rest of the framing.
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "tdist/errors.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"

namespace tdist {

namespace {
std::exception_ptr protocol_error(const std::string& peer, const std::string& what) {
  return std::make_exception_ptr(DistNetworkError("protocol error from " + peer + ": " + what));
}
}  // namespace

bool TcpTransport::uses_rendezvous(const Peer& p, size_t size) const {
  return !p.path && rendezvous_bytes_ > 0 && size > rendezvous_bytes_;
}

// A receive (null: discard) cleared for the peer's message `id` of `size`
// bytes, of which `arrived` (its head, or nothing yet) are in place; the rest
// may now come, in pieces over the peer's sockets. With mu_ held.
void TcpTransport::expect_rendezvous_data_locked(Peer& p, uint32_t id, std::shared_ptr<Request> req, size_t size,
                                                 size_t arrived) {
  const size_t rest = size - wire::rendezvous_head(size);
  RendezvousRx rx{std::move(req), size, size - arrived, wire::piece_count(rest, 1 + p.lanes.size()) > 1};
  if (rx.on_lanes) p.lanes_busy.fetch_add(1, std::memory_order_relaxed);
  p.rendezvous_rx.emplace(id, std::move(rx));
}

// Checks a rendezvous data header (main socket or extra one) against what we
// cleared, and returns where its bytes go (nullptr: discard them). Fails the
// peer and returns false when the header does not fit. With rx_mu_ held.
bool TcpTransport::begin_piece(Peer& p, uint32_t id, uint64_t offset, uint64_t bytes, char*& dst) {
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = p.rendezvous_rx.find(id);
    if (it == p.rendezvous_rx.end()) {
      problem = "data for message " + std::to_string(id) + " that was not cleared";
    } else if (offset > it->second.size || bytes > it->second.size - offset || bytes > it->second.left) {
      problem = "data for message " + std::to_string(id) + " at offset " + std::to_string(offset) + ", " +
                std::to_string(bytes) + " bytes, outside its " + std::to_string(it->second.size) + " bytes";
    } else {
      dst = it->second.request ? static_cast<char*>(it->second.request->data()) + offset : nullptr;
      return true;
    }
  }
  fail_peer(p, protocol_error(describe_peer(p.rank), problem));
  return false;
}

// A piece of message `id` arrived whole; the last one completes the receive.
void TcpTransport::finish_piece(Peer& p, uint32_t id, size_t bytes) {
  std::shared_ptr<Request> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = p.rendezvous_rx.find(id);
    if (it == p.rendezvous_rx.end()) return;  // failed meanwhile
    it->second.left -= bytes;
    if (it->second.left > 0) return;
    done = std::move(it->second.request);
    if (it->second.on_lanes) p.lanes_busy.fetch_sub(1, std::memory_order_relaxed);
    p.rendezvous_rx.erase(it);
  }
  if (done) done->complete(nullptr, p.rank);
}

// A receive posted after the peer announced its message: the head is copied
// from the buffer once it is whole, the rest comes after our clear-to-send
// (which the caller sends once mu_ is released). On a size mismatch the
// receive fails and the data is discarded; the failed receive is not touched
// again (a blocking receive's request may be gone). With mu_ held.
void TcpTransport::clear_announced_locked(const std::shared_ptr<Request>& req, const std::shared_ptr<Unexpected>& entry) {
  const bool fits = entry->size == req->size();
  if (!fits) req->complete(matching_.size_mismatch(entry->peer, req->tag(), req->size(), entry->size), entry->peer);
  Peer& p = *peers_[entry->peer];
  const size_t head = wire::rendezvous_head(entry->size);
  if (entry->complete) {  // the head is here: only the rest is due
    if (fits && head > 0) std::memcpy(req->data(), entry->data.data(), head);
    matching_.pool_locked().give(std::move(entry->data));
    expect_rendezvous_data_locked(p, entry->rendezvous_id, fits ? req : nullptr, entry->size, head);
  } else {  // it gets the head once that is in (finish_unexpected_head)
    entry->matched = true;
    if (fits) entry->waiter = req;
    expect_rendezvous_data_locked(p, entry->rendezvous_id, fits ? req : nullptr, entry->size, 0);
  }
}

void TcpTransport::discard_announced_locked(const std::vector<std::shared_ptr<Unexpected>>& announced) {
  for (auto& entry : announced) {
    Peer& p = *peers_[entry->peer];
    if (entry->complete) {
      matching_.pool_locked().give(std::move(entry->data));
      expect_rendezvous_data_locked(p, entry->rendezvous_id, nullptr, entry->size, wire::rendezvous_head(entry->size));
    } else {  // its head is still arriving: finish_unexpected_head counts it
      entry->matched = true;
      expect_rendezvous_data_locked(p, entry->rendezvous_id, nullptr, entry->size, 0);
    }
  }
}

// A request-to-send: match it with a posted receive like a message's header,
// or keep it as an unexpected (announced only) message for a later receive.
// Its head follows: read next, as the first piece of the payload when a
// receive matched, else into the unexpected message's buffer.
void TcpTransport::on_request_to_send(Peer& p) {
  const uint32_t id = p.header.reserved;
  const uint64_t tag = p.header.tag;
  const uint32_t comm = p.header.comm;
  const size_t size = p.header.size, head = wire::rendezvous_head(size);
  bool clear = false, cannot_buffer = false;
  std::shared_ptr<Unexpected> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool fits = false;
    if (auto req = matching_.take_posted_locked(p.rank, comm, tag, size, fits)) {
      // A receive that failed on a size mismatch is done: null, the data is discarded.
      expect_rendezvous_data_locked(p, id, fits ? std::move(req) : nullptr, size, 0);
      clear = true;
    } else if (matching_.comm_closed_locked(comm)) {
      // A late message of a closed or aborted communicator: nobody will
      // receive it, and its sender waits for an answer. Cleared, dropped.
      expect_rendezvous_data_locked(p, id, nullptr, size, 0);
      clear = true;
    } else {
      matching_.fail_out_of_step_locked(p.rank, comm, tag);
      try {
        entry = matching_.buffer_locked(p.rank, comm, tag, size, head);
        entry->rendezvous = true;
        entry->rendezvous_id = id;
      } catch (const std::bad_alloc&) {
        cannot_buffer = true;
      }
    }
  }
  if (cannot_buffer) {  // the stream cannot go on without reading the head somewhere
    fail_peer(p, std::make_exception_ptr(DistBackendError(
                     "out of memory: cannot buffer " + std::to_string(head) + " bytes of a message of " +
                     std::to_string(size) + " bytes (" + matching_.tag_text(tag) + ") from " +
                     describe_peer(p.rank) + " until its receive is posted")));
    return;
  }
  if (clear) {
    // The clear-to-send goes before the head is read: the rest of the payload
    // is on its way sooner.
    send_clear_to_send(p, id);
    p.header = wire::MessageHeader{wire::kRdvDataMagic, id, 0, head};
    begin_rendezvous_data(p);
    return;
  }
  p.header.size = head;  // the frame's payload, read by the framing; finish_payload ends it
  p.in_payload = true;
  p.payload_done = 0;
  p.dst = entry->data.data();
  p.rx.request.reset();
  p.rx.buffered = std::move(entry);
}

// The head of an unexpected rendezvous message arrived whole. A receive that
// matched it meanwhile gets it now (it was cleared then; the rest may be
// arriving); else it waits in the entry for one. With rx_mu_ held.
void TcpTransport::finish_unexpected_head(Peer& p, std::shared_ptr<Unexpected> entry) {
  const size_t head = wire::rendezvous_head(entry->size);
  {
    std::lock_guard<std::mutex> lock(mu_);
    entry->complete = true;
    if (!entry->matched) return;
    if (entry->waiter && head > 0) std::memcpy(entry->waiter->data(), entry->data.data(), head);
    matching_.pool_locked().give(std::move(entry->data));
    entry->waiter.reset();
  }
  finish_piece(p, entry->rendezvous_id, head);
}

// The peer is ready for one of our announced sends: queue its payload, in
// pieces over all the peer's sockets when it has several.
void TcpTransport::on_clear_to_send(Peer& p) {
  const uint32_t id = p.header.reserved;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> tx(p.tx_mu);
    if (p.tx_failed) return;
    auto it = p.awaiting_cts.find(id);
    if (it == p.awaiting_cts.end()) {
      error = protocol_error(describe_peer(p.rank), "clear-to-send for unknown message " + std::to_string(id));
    } else {
      auto req = std::move(it->second);
      p.awaiting_cts.erase(it);
      // The request-to-send carried the head; the rest goes now, a piece per
      // socket. The main socket's piece goes in slices: a clear-to-send for
      // the peer's own large message may pass between two (it never cuts into
      // a frame being written), so both directions of an exchange can stream
      // at once.
      const uint64_t size = req->size(), head = wire::rendezvous_head(size), rest = size - head;
      const uint64_t pieces = wire::piece_count(rest, 1 + p.lanes.size());
      const uint64_t main_bytes = wire::piece_size(rest, pieces, 0);
      const uint64_t slice = p.slice_bytes > 0 ? p.slice_bytes : std::max<uint64_t>(main_bytes, 1);
      const uint64_t slices = std::max<uint64_t>(1, (main_bytes + slice - 1) / slice);
      const uint64_t frames = pieces - 1 + slices;
      auto shared = frames > 1 ? std::make_shared<SendPieces>(SendPieces{frames, false}) : nullptr;
      for (uint64_t i = 0; i < pieces; ++i) {
        const uint64_t offset = head + wire::piece_offset(rest, pieces, i), bytes = wire::piece_size(rest, pieces, i);
        const uint64_t step = i == 0 ? slice : bytes;
        uint64_t at = 0;
        do {  // once for an empty piece, as `slices` counts it
          const uint64_t len = std::min(step, bytes - at);
          Peer::TxItem item{wire::MessageHeader{wire::kRdvDataMagic, id, offset + at, len}, req, 0, len, offset + at,
                            true, shared};
          (i == 0 ? p.txq : p.lanes[i - 1]->txq).push_back(std::move(item));
          at += len;
        } while (at < bytes);
      }
      error = flush_locked(p);
      if (!error) update_output_locked(p);
    }
  }
  if (error) fail_peer(p, error);
}

// A piece of a message we cleared arrives on the main socket: into its
// receive's buffer, or discarded.
void TcpTransport::begin_rendezvous_data(Peer& p) {
  char* dst = nullptr;
  if (!begin_piece(p, p.header.reserved, p.header.tag, p.header.size, dst)) return;
  p.in_payload = true;
  p.payload_done = 0;
  p.dst = dst;
  p.rx.request.reset();
}

// Answers a request-to-send. Control frames go ahead of queued messages (but
// never into the middle of one being written): they are independent of the
// order of messages, and a peer waiting for one should not wait for our data.
void TcpTransport::send_clear_to_send(Peer& p, uint32_t id) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> tx(p.tx_mu);
    if (p.tx_failed) return;
    auto pos = p.txq.begin();
    if (pos != p.txq.end() && pos->sent > 0) ++pos;
    p.txq.insert(pos, Peer::TxItem{wire::MessageHeader{wire::kCtsMagic, id, 0, 0}, nullptr});
    error = flush_locked(p);
    if (!error) update_output_locked(p);
  }
  if (error) ::shutdown(p.fd.get(), SHUT_RDWR);  // the reading side notices and fails the peer
}

}  // namespace tdist
