// One posted send or receive of a transport. Completed exactly once, by the
// transport, with an error or successfully.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>

#include "util/deadline.h"

namespace tdist {

class Request {
 public:
  enum class Kind : uint8_t { Send, Recv };
  Request(Kind kind, int peer, uint64_t tag, void* data, size_t size)
      : kind_(kind), peer_(peer), tag_(tag), data_(data), size_(size) {}

  Kind kind() const { return kind_; }
  int peer() const { return peer_; }  // kAnySource for a recv from anyone
  uint64_t tag() const { return tag_; }
  void* data() const { return data_; }
  size_t size() const { return size_; }

  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits until completion or the deadline; returns false on the deadline.
  // Spins briefly first (latency), then blocks (many ranks on few cores).
  bool wait_until(Deadline deadline);
  // The error it completed with (nullptr on success); valid once done().
  std::exception_ptr error() const { return error_; }
  // The rank the data came from (recv), valid once done().
  int source() const { return source_; }

  // Transport side. Returns false if it was already completed.
  bool complete(std::exception_ptr error, int source);

  // For a thread waiting on this request while another drives the transport:
  // blocks until done, poke() or the deadline; returns done().
  bool wait_done_or_poked(Deadline deadline);
  // Wakes wait_done_or_poked (the driver left: the waiter may drive now).
  void poke();

 private:
  const Kind kind_;
  const int peer_;
  const uint64_t tag_;
  void* const data_;
  const size_t size_;
  std::atomic<bool> done_{false};
  std::atomic<bool> claimed_{false};
  std::exception_ptr error_;
  int source_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  bool waiting_ = false;
  bool poked_ = false;
};

}  // namespace tdist
