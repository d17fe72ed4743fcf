// Matching above any wire: which receive an arriving message belongs to.
// Receives match on (communicator, peer, tag), in the order posted; a message
// that arrives before its receive waits in a buffer of the payload pool until
// one is posted. The same rules hold whichever data path a message came by
// (a socket, shared-memory rings, a path registered by a test), and for a
// rank's messages to itself. The mesh that owns the wires (transport/tcp/)
// calls these as headers arrive and receives are posted; it also tells
// matching when a peer is lost, leaves a communicator or the mesh aborts, so
// that the receives depending on it fail naming it.
//
// One mutex guards all of it (mutex()); the mesh guards its own per-peer
// state that must change together with matching's under the same one. The
// *_locked members expect it held. Nothing here allocates per message beyond
// a buffered message's entry and payload, nor calls through a virtual.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "transport/data_path.h"
#include "transport/payload_pool.h"
#include "transport/request.h"
#include "transport/wire.h"

namespace tdist {

// A message that arrived before its receive was posted.
struct BufferedMessage {
  int peer;
  uint32_t comm = 0;
  uint64_t tag;
  size_t size = 0;       // the message's size
  // Only announced: data holds the payload's head (wire::rendezvous_head), and
  // the sender waits for our clear-to-send to send the rest.
  bool rendezvous = false;
  uint32_t rendezvous_id = 0;
  PayloadPool::Buffer data;  // from the pool; returned once copied out
  bool complete = false;     // all of data arrived
  // A receive matched while data was still arriving: it gets data then (a
  // rendezvous whose receive failed on its size has matched, but no waiter).
  bool matched = false;
  std::shared_ptr<Request> waiter;
};

// How matching names things in its errors (called on error paths only).
struct MatchingNames {
  std::string label;  // "rank 1 of group default_pg": prefixes log lines
  std::function<std::string(int peer)> describe_peer;  // "rank 2 at 10.0.0.2:4567"
  // Given the tag of a receive waiting on a peer and the tag of a message that
  // peer sent instead, says how the ranks are out of step ("" if they are not).
  std::function<std::string(uint64_t waiting_tag, uint64_t arrived_tag)> desync;
  // "all_reduce #2 (float32, SUM, step 1)"; unset: "tag N".
  std::function<std::string(uint64_t tag)> describe_tag;
};

class Matching {
 public:
  // `rank` is this rank in a mesh of `size`.
  Matching(int rank, int size, MatchingNames names);

  std::mutex& mutex() const { return mu_; }

  // --- Arriving messages (the mesh's receive side). ---
  // A header arrived from `peer` over any path: matches it with a posted
  // receive or buffers it. Returns where its payload goes (nullptr: discard
  // it). Takes the mutex.
  char* begin_message(int peer, const wire::MessageHeader& header, MessageSlot& slot);
  // As begin_message, but only where a receive is posted for the message (or
  // it is to be dropped); otherwise nothing happens, `waiting` is set and
  // nullptr returned (a path that would rather wait for the receive).
  char* begin_posted_message(int peer, const wire::MessageHeader& header, MessageSlot& slot, bool& waiting);
  // Its last byte arrived: completes the receive or marks the buffer whole.
  void end_message(int peer, MessageSlot& slot);
  // Removes the first posted receive matching a message; on a size mismatch
  // (fits false) it is completed with the error, and must not be touched: its
  // owner may be gone (a blocking receive's request lives on its stack).
  std::shared_ptr<Request> take_posted_locked(int peer, uint32_t comm, uint64_t tag, size_t size, bool& fits);
  // Fails the receives posted for `peer` in `comm` that its message with `tag`
  // proves out of step.
  void fail_out_of_step_locked(int peer, uint32_t comm, uint64_t arrived_tag);
  // Buffers a message of `size` from `peer` with room for `bytes` of it (all
  // of it, or an announced message's head). Throws std::bad_alloc.
  std::shared_ptr<BufferedMessage> buffer_locked(int peer, uint32_t comm, uint64_t tag, size_t size, size_t bytes);
  // Whether a message of `comm` is late (its communicator closed): dropped.
  bool comm_closed_locked(uint32_t comm) const { return comm != 0 && closed_comms_.count(comm) != 0; }
  PayloadPool& pool_locked() { return payload_pool_; }

  // --- Posted receives. ---
  enum class Served {
    No,          // nothing arrived for it: the caller posts it (post_locked)
    Done,        // completed (from a buffer, or failed)
    Announced,   // matched an announced message: the mesh clears it (see `announced`)
  };
  // Serves a new receive from what already arrived, or fails it at once when
  // it cannot be served (aborted, its peer lost or gone from its communicator).
  // On Announced, `announced` is the entry, taken off the buffered messages;
  // the receive is not completed yet, whatever its size.
  Served match_buffered_locked(const std::shared_ptr<Request>& req, std::shared_ptr<BufferedMessage>& announced);
  void post_locked(std::shared_ptr<Request> req) { posted_.push_back(std::move(req)); }
  // A send to this rank itself: matched like an arriving message, its payload
  // copied at once; complete when this returns. Takes the mutex.
  void deliver_to_self(const std::shared_ptr<Request>& send);

  // --- Failures and departures. ---
  // The mesh stops: remembers the cause; false when it had stopped already.
  bool abort_locked(std::exception_ptr cause);
  // Fails every posted receive and every receive waiting for a buffer.
  void fail_all_locked(const std::exception_ptr& cause);
  std::exception_ptr aborted_locked() const { return aborted_; }
  // `peer` is lost (its connection broke, it gave up or left the mesh): its
  // posted receives fail, receives from any rank fail with the last peer, and
  // what it had only begun to send is dropped (what arrived whole stays).
  void peer_lost_locked(int peer, const std::exception_ptr& error);
  // The pair never connected: only the receives posted for it fail.
  void link_lost_locked(int peer, const std::exception_ptr& error);
  // The error `peer` was lost with, or null.
  std::exception_ptr peer_error_locked(int peer) const { return lost_[static_cast<size_t>(peer)]; }
  // The first lost peer's error, or null.
  std::exception_ptr any_peer_error_locked() const;
  // `peer` left communicator `comm` (its goodbye came): its receives there fail.
  void comm_left_locked(uint32_t comm, int peer);
  // The error of a request of `comm` for `peer` when the peer left it or the
  // communicator was aborted, else null.
  std::exception_ptr left_error_locked(uint32_t comm, int peer) const;
  // Some peer left some communicator, or one was aborted: posts look at
  // left_error_locked (read without the mutex, so that posts cost nothing
  // while nobody left).
  bool any_left() const { return any_left_.load(std::memory_order_acquire); }
  // Communicator `comm` is closed: its posted receives fail with `cause`, its
  // buffered messages are freed, its later messages dropped. Announced
  // messages (rendezvous) of it are taken off into `announced`: their senders
  // wait for a clear-to-send, which the mesh sends to have their data dropped.
  void close_comm_locked(uint32_t comm, const std::exception_ptr& cause,
                         std::vector<std::shared_ptr<BufferedMessage>>& announced);
  // Communicator `comm` is aborted (here, or by a member's notice): closed as
  // above, and every later request of it fails with `cause`. What is under
  // way on a wire is the mesh's to redirect (TcpTransport::drop_comm_locked).
  void abort_comm_locked(uint32_t comm, const std::exception_ptr& cause,
                         std::vector<std::shared_ptr<BufferedMessage>>& announced);

  // --- Errors. ---
  std::exception_ptr size_mismatch(int peer, uint64_t tag, size_t posted, size_t arrived) const;
  std::exception_ptr out_of_step(int peer, uint64_t waiting_tag, uint64_t arrived_tag) const;
  std::string tag_text(uint64_t tag) const;
  std::string describe_peer(int peer) const;

 private:
  const int rank_;
  const int size_;
  const MatchingNames names_;
  mutable std::mutex mu_;
  // Deques, not lists: a receive posted and matched costs no allocation (the
  // match is nearly always at the front; erasing elsewhere moves the few behind).
  std::deque<std::shared_ptr<Request>> posted_;             // receives waiting for a message, in post order
  std::deque<std::shared_ptr<BufferedMessage>> buffered_;  // messages waiting for a receive, in arrival order
  PayloadPool payload_pool_;                                // their buffers
  std::exception_ptr aborted_;
  std::vector<std::exception_ptr> lost_;  // by peer: the error it was lost with
  int lost_count_ = 0;
  std::set<uint32_t> closed_comms_;                // closed by close_comm: their late messages are dropped
  std::set<std::pair<uint32_t, int>> left_comms_;  // (communicator, peer): the peer said it left
  std::map<uint32_t, std::exception_ptr> aborted_comms_;  // aborted communicators: their requests fail with it
  std::atomic<bool> any_left_{false};              // left_comms_ is not empty
};

}  // namespace tdist
