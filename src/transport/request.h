// One posted send or receive of a transport. Completed exactly once, by the
// transport, with an error or successfully.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>

#include "util/deadline.h"

namespace tdist {

class Request {
 public:
  enum class Kind : uint8_t { Send, Recv };
  Request(Kind kind, int peer, uint64_t tag, void* data, size_t size)
      : kind_(kind), peer_(peer), tag_(tag), data_(data), size_(size), link_peer_(peer) {}

  Kind kind() const { return kind_; }
  int peer() const { return peer_; }  // kAnySender for a recv from anyone
  uint64_t tag() const { return tag_; }
  void* data() const { return data_; }
  size_t size() const { return size_; }

  bool done() const { return (state_.load(std::memory_order_acquire) & kDone) != 0; }
  // Waits until completion or the deadline; returns false on the deadline.
  // Spins briefly first (latency), then blocks (many ranks on few cores).
  bool wait_until(Deadline deadline);
  // The error it completed with (nullptr on success); valid once done().
  std::exception_ptr error() const { return error_; }
  // The rank the data came from (recv), valid once done(), in the numbering
  // of whoever posted the request (a communicator's, when routed).
  int source() const { return source_ >= 0 && comm_rank_of_ ? comm_rank_of_[source_] : source_; }

  // Routing through a communicator of the process's shared transport
  // (transport/communicator.h), set before posting: the transport matches on
  // (comm, link peer, tag), where the link peer is the peer in the shared
  // transport's numbering; comm_rank_of maps that numbering back for
  // source(), and `outstanding` counts the communicator's requests not yet
  // completed. Unrouted requests are the shared transport's own (comm 0).
  uint32_t comm() const { return comm_; }
  int link_peer() const { return link_peer_; }
  void route(uint32_t comm, int link_peer, const int* comm_rank_of, std::atomic<int64_t>* outstanding) {
    comm_ = comm;
    link_peer_ = link_peer;
    comm_rank_of_ = comm_rank_of;
    outstanding_ = outstanding;
    if (outstanding_) outstanding_->fetch_add(1, std::memory_order_seq_cst);
  }

  // Transport side. Returns false if it was already completed.
  bool complete(std::exception_ptr error, int source);
  // Success, for a request that no other thread can see yet (the transport
  // finished it while posting it): plain stores, no wake-up.
  void complete_unshared(int source) {
    claimed_.store(true, std::memory_order_relaxed);
    if (outstanding_) outstanding_->fetch_sub(1, std::memory_order_release);
    source_ = source;
    state_.store(kDone, std::memory_order_release);
  }

  // For a thread waiting on this request while another drives the transport:
  // blocks until done, poke() or the deadline; returns done().
  bool wait_done_or_poked(Deadline deadline);
  // Wakes wait_done_or_poked (the driver left: the waiter may drive now).
  void poke();

 private:
  // Sleeps on state_ while it equals `seen` (with kSleeping set), at most until the deadline.
  void sleep(uint32_t seen, Deadline deadline);

  const Kind kind_;
  const int peer_;
  const uint64_t tag_;
  void* const data_;
  const size_t size_;
  uint32_t comm_ = 0;
  int link_peer_;
  const int* comm_rank_of_ = nullptr;
  std::atomic<int64_t>* outstanding_ = nullptr;
  // A futex word rather than a mutex and condition variable: completing a
  // request (every message) costs one atomic operation, and the wake-up
  // system call only when a thread sleeps on it.
  static constexpr uint32_t kDone = 1, kPoked = 2, kSleeping = 4;
  std::atomic<uint32_t> state_{0};
  std::atomic<bool> claimed_{false};  // the first complete() wins; error_ and source_ are its
  std::exception_ptr error_;
  int source_ = -1;
};

// A send over a buffer of `size` bytes that the request owns, left unwritten
// (pages never written are never touched): the caller copies in what is to
// go. A send of an aborted communicator that is under way on a wire finishes
// from such a copy of its bytes still to go (a frame cannot be cut off), while
// the original completes with the abort at once and its buffer is its
// owner's again; control frames with a text use one too.
std::shared_ptr<Request> owned_send(int peer, uint64_t tag, size_t size);

}  // namespace tdist
