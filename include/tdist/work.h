// The handle of one operation: every call returns one, already complete when
// the call was not async.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "tdist/future.h"

namespace tdist {

inline constexpr std::chrono::milliseconds kNoTimeout = std::chrono::milliseconds::max();

class Work {
 public:
  // `label` ("rank 3 in group default_pg") prefixes its messages.
  Work(std::string op, uint64_t sequence_number, std::string label = "");
  // The same, sharing the label with the other works of its group (no copy per operation).
  Work(std::string op, uint64_t sequence_number, std::shared_ptr<const std::string> label);
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  virtual bool is_completed() const;
  // Completed without error.
  virtual bool is_success() const;
  // The error the operation ended with, or nullptr.
  virtual std::exception_ptr exception() const;
  // Blocks until the operation completes and rethrows its error. With a
  // timeout, throws DistBackendError naming the operation if it is not done by
  // then (the operation itself goes on). Returns true.
  virtual bool wait(std::chrono::milliseconds timeout = kNoTimeout);
  // For recv from any source: the rank (group rank) the message came from.
  virtual int source_rank() const;
  // A future that completes with the operation's output tensors (collectives;
  // point-to-point operations have none and throw DistBackendError, like Gloo).
  virtual std::shared_ptr<Future> get_future();
  // The output tensors (the in-place tensor for all_reduce, the list for all_gather, ...).
  const std::vector<Tensor>& result() const { return result_; }

  const std::string& op_name() const { return op_; }
  uint64_t sequence_number() const { return seq_; }

  // Used by backends: completes the work (with an error, or successfully).
  void finish(std::exception_ptr error = nullptr);
  // The same for a work that no other thread can see yet (a blocking call
  // that ran on its caller's thread before returning it): nobody can wait on
  // it or have asked for its future, so it needs neither the lock nor a wake-up.
  void finish_unshared(std::exception_ptr error = nullptr);
  void set_source_rank(int rank);
  void set_result(std::vector<Tensor> result) { result_ = std::move(result); }
  static std::shared_ptr<Work> completed(std::string op, uint64_t seq = 0);

 private:
  friend class TdistBackend;  // reuses the Works of blocking calls (reuse())
  // Makes a finished Work that nobody else holds pending again, for another
  // operation: no allocation (result_ keeps its capacity).
  void reuse(const char* op, uint64_t seq, std::span<const Tensor> result);
  void complete_future(Future& future);
  std::string op_;
  uint64_t seq_;
  const std::shared_ptr<const std::string> label_;  // null: none
  mutable std::mutex mu_;
  // kPending, kDone, or kWaitedFor (pending, and a thread sleeps on it: the
  // finisher makes the futex wake syscall only then). Turns kDone under mu_
  // once error_ is final, read without it (a blocking call finds its work done
  // and returns without taking the mutex). A futex word rather than a
  // condition variable: nothing to set up or tear down per operation.
  static constexpr uint32_t kPending = 0, kDone = 1, kWaitedFor = 2;
  std::atomic<uint32_t> state_{kPending};
  bool done() const { return state_.load(std::memory_order_acquire) == kDone; }
  int source_rank_ = -1;
  std::exception_ptr error_;
  std::vector<Tensor> result_;
  std::shared_ptr<Future> future_;
};

}  // namespace tdist
