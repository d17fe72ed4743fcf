// Layer 3: moves tagged byte ranges between the ranks of one group.
// Messages between two ranks with the same tag arrive in the order sent.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "transport/request.h"
#include "util/deadline.h"

namespace tdist {

// A receive from whichever peer sends first (the public API's kAnySource,
// which the backends check equal: the transport does not see that layer).
inline constexpr int kAnySender = -1;

// Throws DistValueError unless `peer` is a rank of a group of `size` other
// than `rank` (or kAnySender, for a receive).
void check_peer_arg(int peer, int rank, int size, bool is_recv);

// A peer that left its group on purpose said so before it closed (a goodbye:
// the TCP notice kNoticeGoodbye, the arena's RankLine::left), so its peers
// fail at once and name it as gone, not as crashed:
// "rank 1 at 10.0.0.2:4567 left the group: it called destroy_process_group".
inline constexpr const char* kLeftByDestroy = "it called destroy_process_group";
inline std::string peer_left_text(const std::string& described_peer, const std::string& how) {
  return described_peer + " left the group: " + how;
}

// How long a rank that timed out waiting for a peer keeps listening for the
// other ranks' notices before its error is final (TcpTransport::explain_stall):
// long enough for ranks whose deadlines expire a little later, short against
// the timeout.
inline Millis stall_grace(Millis timeout) { return std::clamp(timeout / 10, Millis(50), Millis(2000)); }

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // The buffer must stay valid until the request is done. A receive must be
  // posted with the exact size of the message; otherwise it fails naming both.
  // Both make a request and post() it.
  std::shared_ptr<Request> isend(int peer, uint64_t tag, const void* data, size_t size) {
    auto r = std::make_shared<Request>(Request::Kind::Send, peer, tag, const_cast<void*>(data), size);
    post(r);
    return r;
  }
  // peer may be kAnySender.
  std::shared_ptr<Request> irecv(int peer, uint64_t tag, void* data, size_t size) {
    auto r = std::make_shared<Request>(Request::Kind::Recv, peer, tag, data, size);
    post(r);
    return r;
  }
  // Posts a send or receive (by its kind) that the caller made: it may live
  // inside a larger object (the Work of a point-to-point call), one allocation
  // per operation instead of two, or on the caller's stack behind a pointer
  // that owns nothing, when the caller waits for it: a transport does not
  // touch a request once it completed it.
  virtual void post(std::shared_ptr<Request> request) = 0;

  // Waits for a request; on the deadline aborts the transport (no buffer is
  // touched after this returns) and throws DistBackendError naming the peer.
  // Rethrows the request's own error otherwise, after aborting the transport
  // too when abort_on_error: a collective that fails must not leave other
  // receives posted into buffers its unwinding frees.
  virtual void wait(Request& request, Deadline deadline, bool abort_on_error = true) = 0;
  // Waits for a request at most until `until`, driving the transport on this
  // thread as wait() does, but without consequences: nothing is aborted and
  // nothing thrown when `until` comes first (a caller's own bound, shorter
  // than the operation's deadline). Returns whether it is done.
  virtual bool wait_a_while(Request& request, Deadline until) { return request.wait_until(until); }

  // Fails every pending and later request with `cause`, from any thread: a
  // transport of its own closes its connections, a communicator of a shared
  // one fails alone (transport/communicator.h). No buffer of a request is
  // touched once this returns.
  virtual void abort(std::exception_ptr cause) = 0;
  // The group is done with the transport (destroy_process_group): later
  // requests fail with `cause`. A transport of its own is aborted; a
  // communicator of a shared one closes alone (transport/communicator.h).
  virtual void close(std::exception_ptr cause) { abort(std::move(cause)); }
  // The cause of an abort or nullptr.
  virtual std::exception_ptr aborted() const = 0;
  // The abort cause, else the error of the first peer whose connection was
  // lost, else nullptr. Lets code that waits outside the transport (shared
  // memory collectives) notice a dead or departed peer.
  virtual std::exception_ptr failure() const = 0;
  // The abort cause, else the error of `peer`'s lost connection, else
  // nullptr: whether waiting for that peer is hopeless. A peer that finished
  // its part and left (closing its connections) must not fail a round that
  // waits only for others.
  virtual std::exception_ptr peer_failure(int peer) const = 0;

  // "rank 2 (10.0.0.2:4567)": for error messages.
  virtual std::string describe_peer(int peer) const = 0;
  // Peers on this host share a host id (hostname, boot id, network namespace).
  virtual bool same_host(int peer) const = 0;
  // The host id of `peer` (or of this rank): equal for the ranks of one
  // host, and the same string on every rank, so that all count hosts alike.
  virtual std::string host_of(int peer) const = 0;

  // Blocking helpers.
  void send(int peer, uint64_t tag, const void* data, size_t size, Deadline deadline) {
    auto r = isend(peer, tag, data, size);
    wait(*r, deadline);
  }
  // Returns the source rank.
  int recv(int peer, uint64_t tag, void* data, size_t size, Deadline deadline) {
    auto r = irecv(peer, tag, data, size);
    wait(*r, deadline);
    return r->source();
  }
};

}  // namespace tdist
