// The handle of one operation: every call returns one, already complete when
// the call was not async.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "tdist/future.h"

namespace tdist {

inline constexpr std::chrono::milliseconds kNoTimeout = std::chrono::milliseconds::max();

// The contract every backend's operations fulfil: the front and the user see
// only this. A backend completes its works its own way (src/work/pending_work.h
// is the CPU one: a futex word, a future on demand).
class Work {
 public:
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Whether the operation has completed. Asking also starts an operation
  // whose start its backend deferred (the tdist backend's small async
  // collectives wait for a waiter or for the group's thread): a program that
  // polls need not wait for that.
  virtual bool is_completed() const = 0;
  // The same answer, starting nothing: for bookkeeping that looks at works it
  // does not wait for (a list of those in flight).
  virtual bool completed_now() const { return is_completed(); }
  // Completed without error.
  virtual bool is_success() const = 0;
  // The error the operation ended with, or nullptr.
  virtual std::exception_ptr exception() const = 0;
  // Blocks until the operation completes and rethrows its error. With a
  // timeout, throws DistBackendError naming the operation if it is not done by
  // then (the operation itself goes on). Returns true.
  virtual bool wait(std::chrono::milliseconds timeout = kNoTimeout) = 0;
  // Device-ordered completion: makes the current device stream wait for the
  // operation (a CUDA backend records an event on its stream when it issues
  // the operation; here the current stream waits on that event), without
  // blocking the host. CPU operations are complete once wait() returns:
  // nothing to do.
  virtual void synchronize() {}
  // For recv from any source: the rank (group rank) the message came from.
  virtual int source_rank() const = 0;
  // A future that completes with the operation's output tensors (collectives;
  // point-to-point operations have none and throw DistBackendError, like Gloo).
  virtual std::shared_ptr<Future> get_future() = 0;
  // torch's get_future_result: a future that completes, never with an error,
  // once the operation has, with WorkResult::SUCCESS, TIMEOUT (the operation
  // failed at its deadline) or COMM_ERROR (any other failure). Built on
  // get_future(), so point-to-point operations have none either
  // (DistBackendError). Waiting on it does not throw the operation's error.
  std::shared_ptr<WorkResultFuture> get_future_result();
  // How an operation that ended with `error` ended (nullptr: SUCCESS).
  static WorkResult result_of(const std::exception_ptr& error);
  // The output tensors (the in-place tensor for all_reduce, the list for all_gather, ...).
  virtual const std::vector<Tensor>& result() const = 0;
  virtual const std::string& op_name() const = 0;
  virtual uint64_t sequence_number() const = 0;

  // A work that is already complete, successfully (no-op calls).
  static std::shared_ptr<Work> completed(std::string op, uint64_t seq = 0);

 protected:
  Work() = default;
};

}  // namespace tdist
