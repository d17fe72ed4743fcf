// The seam between the process's mesh of peers and the ways bytes reach a
// peer. The mesh (transport/tcp/) keeps one authenticated socket to every
// peer: the control channel, which carries the set-up, doorbells and give-up
// notices, and which tells when a peer is gone. A peer's messages travel over
// the first entry of TDIST_TRANSPORTS (an ordered list, "shm,tcp" by
// default) that reaches it:
//   shm  a pair of shared-memory rings (transport/shm/), for a peer on this host;
//   tcp  the control socket itself, for any peer.
// A new way (RDMA, say) is another DataPath with a factory registered under
// its name (transport/data_path_registry.h), set up over the control socket
// like the rings, and named in the list. Matching (transport/matching.h),
// progress, deadlines and blame stay with the mesh: a path frames bytes and
// hands each message to the mesh as it arrives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "transport/request.h"
#include "transport/wire.h"

namespace tdist {

// A message buffered because no receive was posted for it yet
// (transport/matching.h).
struct BufferedMessage;

// Where the message that is arriving from a peer goes: a posted receive, a
// buffer of the mesh, or nowhere (its payload is discarded). A path keeps
// one per direction it receives on and hands it back at the end.
struct MessageSlot {
  std::shared_ptr<Request> request;
  std::shared_ptr<BufferedMessage> buffered;
};

// What the mesh does for a path.
class PathHost {
 public:
  // A header arrived from `peer`: matches it with a posted receive or buffers
  // it. Returns where its payload goes (nullptr: discard it). With the mesh's
  // receive lock held (whoever makes progress).
  virtual char* begin_message(int peer, const wire::MessageHeader& header, MessageSlot& slot) = 0;
  // The same where a receive is posted for it (or it is dropped); else does
  // nothing and sets `waiting` (Matching::begin_posted_message).
  virtual char* begin_posted_message(int peer, const wire::MessageHeader& header, MessageSlot& slot,
                                     bool& waiting) = 0;
  // Its last byte arrived: completes the receive or marks the buffer whole.
  virtual void end_message(int peer, MessageSlot& slot) = 0;
  // The peer broke the path's protocol: fails the peer.
  virtual void path_failed(int peer, std::exception_ptr error) = 0;
  // Wakes the peer over the control socket (it sleeps in epoll): with the
  // peer's send lock held, or taking it.
  virtual void doorbell_locked(int peer) = 0;
  virtual void doorbell(int peer) = 0;
  virtual std::string describe_peer(int peer) const = 0;

 protected:
  ~PathHost() = default;
};

// The data path to one peer, other than the control socket.
class DataPath {
 public:
  virtual ~DataPath() = default;

  // Sending, with the peer's send lock held. A send completes when all of it
  // is written (the peer may not have read it yet).
  virtual void post_locked(std::shared_ptr<Request> request) = 0;
  // Writes what waited for room.
  virtual void flush_locked() = 0;
  // Sends wait for room: read without the lock by whoever polls, which then
  // takes the lock and flushes.
  virtual bool backlog() const = 0;
  // Fails every queued send (the peer failed, or the mesh aborted).
  virtual void fail_sends_locked(const std::exception_ptr& error) = 0;
  // Communicator `comm` aborted: its sends not begun fail with `error` and
  // are dropped; one partly written fails too, and the rest of its bytes go
  // from a copy (owned_send), so that the framing goes on.
  virtual void abandon_sends_locked(uint32_t comm, const std::exception_ptr& error) = 0;
  // Before sleeping with a backlog: asks the reader for a doorbell when it
  // makes room. True when there is room already (do not sleep).
  virtual bool prepare_sleep_locked() = 0;

  // Receiving, by whoever makes progress (the mesh's receive lock held).
  // Hands every message that arrived whole or in part to the host; true when
  // anything moved.
  virtual bool poll() = 0;
  // Before sleeping: asks the writer for a doorbell when it writes. True when
  // something arrived already (do not sleep).
  virtual bool prepare_sleep() = 0;
  // As poll(), but holding nothing back for a receive not yet posted: a
  // notice from the peer (it left the group, aborted it, gave up) follows,
  // and must find every message sent before it with the mesh.
  virtual bool drain() { return poll(); }
  // The message being received, if any (abort fails its receive).
  virtual MessageSlot& incoming() = 0;
  // Its receive failed (its communicator aborted): the rest of its payload is
  // read and dropped, never written into the receive's buffer.
  virtual void discard_incoming() = 0;
  // Receives matched earlier and still filling (the path's own state, beside
  // incoming()) fail with `error`: those of communicator *comm, or all where
  // comm is null (the peer failed, the mesh aborted). Once this returns
  // nothing writes into their buffers. With the mesh's receive lock held.
  virtual void fail_pending_receives_locked(const uint32_t* comm, const std::exception_ptr& error) {
    (void)comm;
    (void)error;
  }
};

// TDIST_TRANSPORTS: the names in order; DistValueError naming the entry for
// an unknown name, a repeated one or an empty list.
std::vector<std::string> data_path_order();

}  // namespace tdist
