// The rendezvous protocol of large socket messages (wire.h): the sender
// announces, the receiver clears once a receive matches, the payload then goes
// straight into that receive's buffer. Receive-side handlers run with rx_mu_
// held, like the rest of the framing.
#include <sys/socket.h>

#include "tdist/backend.h"
#include "tdist/errors.h"
#include "transport/tcp_peer.h"
#include "transport/tcp_transport.h"
#include "transport/wire.h"

namespace tdist {

namespace {
std::exception_ptr protocol_error(const std::string& peer, const std::string& what) {
  return std::make_exception_ptr(DistNetworkError("protocol error from " + peer + ": " + what));
}
}  // namespace

bool TcpTransport::uses_rendezvous(const Peer& p, size_t size) const {
  return !p.shm && rendezvous_bytes_ > 0 && size > rendezvous_bytes_;
}

// A request-to-send: match it with a posted receive like a message's header,
// or keep it as an unexpected (announced only) message for a later receive.
void TcpTransport::on_request_to_send(Peer& p) {
  const uint32_t id = p.header.reserved;
  const uint64_t tag = p.header.tag;
  const size_t size = p.header.size;
  bool clear = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool fits = false;
    if (auto req = take_posted_locked(p.rank, tag, size, fits)) {
      // A receive that failed on a size mismatch is done: null, the data is discarded.
      p.rendezvous_rx.emplace(id, fits ? std::move(req) : nullptr);
      clear = true;
    } else {
      fail_out_of_step_locked(p.rank, tag);
      auto entry = std::make_shared<Unexpected>();
      entry->peer = p.rank;
      entry->tag = tag;
      entry->size = size;
      entry->rendezvous = true;
      entry->rendezvous_id = id;
      unexpected_.push_back(std::move(entry));
    }
  }
  if (clear) send_clear_to_send(p, id);
}

// The peer is ready for one of our announced sends: queue its payload.
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
      p.txq.push_back(
          Peer::TxItem{wire::MessageHeader{wire::kRdvDataMagic, id, req->tag(), req->size()}, req, 0});
      if (p.txq.size() == 1) error = flush_locked(p);
      if (!error && !p.txq.empty() && !p.out_armed) arm_output_locked(p, true);
    }
  }
  if (error) fail_peer(p, error);
}

// The payload of a message we cleared: into its receive's buffer, or discarded.
void TcpTransport::begin_rendezvous_data(Peer& p) {
  const uint32_t id = p.header.reserved;
  std::shared_ptr<Request> req;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = p.rendezvous_rx.find(id);
    if (it == p.rendezvous_rx.end()) {
      // Not cleared by us: nothing in this stream can be trusted any more.
    } else {
      req = std::move(it->second);
      p.rendezvous_rx.erase(it);
      p.in_payload = true;
      p.payload_done = 0;
      p.dst = nullptr;
      p.rx_request.reset();
      if (req && req->size() == p.header.size) {
        p.dst = static_cast<char*>(req->data());
        p.rx_request = std::move(req);
      } else if (req) {
        req->complete(size_mismatch(p.rank, p.header.tag, req->size(), p.header.size), p.rank);
      }
      return;
    }
  }
  fail_peer(p, protocol_error(describe_peer(p.rank), "data for message " + std::to_string(id) + " that was not cleared"));
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
    p.txq.insert(pos, Peer::TxItem{wire::MessageHeader{wire::kCtsMagic, id, 0, 0}, nullptr, 0, false});
    error = flush_locked(p);
    if (!error && !p.txq.empty() && !p.out_armed) arm_output_locked(p, true);
  }
  if (error) ::shutdown(p.fd.get(), SHUT_RDWR);  // the reading side notices and fails the peer
}

}  // namespace tdist
