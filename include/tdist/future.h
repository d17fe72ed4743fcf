// The future of an operation (Work::get_future): completes with the
// operation's output tensors, or its error; then-callbacks chain on it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tdist/tensor.h"

namespace tdist {

class Future : public std::enable_shared_from_this<Future> {
 public:
  Future() = default;
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;

  bool completed() const;
  bool has_error() const;
  // Blocks until complete; rethrows the error.
  void wait();
  // Blocks until complete; the output tensors of the operation (rethrows the error).
  const std::vector<Tensor>& value();
  std::exception_ptr exception() const;

  // Runs callback(*this) once complete (at once if it already is), on the
  // thread that completes it. The returned future completes when the
  // callback has run: with this future's value, or with the error the
  // callback threw (or this future's error).
  std::shared_ptr<Future> then(std::function<void(Future&)> callback);
  // Like then, without a future of its own; exceptions of the callback are logged.
  void add_done_callback(std::function<void(Future&)> callback);

  // Producer side: exactly one of these, once.
  void mark_completed(std::vector<Tensor> value = {});
  void set_error(std::exception_ptr error);

 private:
  void complete(std::vector<Tensor> value, std::exception_ptr error);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<Tensor> value_;
  std::exception_ptr error_;
  std::vector<std::function<void(Future&)>> callbacks_;
};

// torch's WorkResult: how an operation ended (Work::get_future_result).
// TIMEOUT: it failed at its deadline (its error says "Timed out"); COMM_ERROR:
// any other failure; UNKNOWN: not known.
enum class WorkResult : uint8_t { SUCCESS = 0, TIMEOUT = 1, COMM_ERROR = 2, UNKNOWN = 100 };
const char* work_result_name(WorkResult result);  // "SUCCESS", ...

// The future of Work::get_future_result: completes, never with an error,
// when the operation does, with how it ended.
class WorkResultFuture {
 public:
  WorkResultFuture() = default;
  WorkResultFuture(const WorkResultFuture&) = delete;
  WorkResultFuture& operator=(const WorkResultFuture&) = delete;

  bool completed() const;
  // Blocks until complete (the operation has its own deadline); the result.
  WorkResult wait();
  WorkResult value() { return wait(); }
  // Runs callback(result) once complete (at once if it already is), on the
  // thread that completes it; exceptions of the callback are logged.
  void add_done_callback(std::function<void(WorkResult)> callback);

  // Producer side, once.
  void mark_completed(WorkResult result);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  WorkResult result_ = WorkResult::UNKNOWN;
  std::vector<std::function<void(WorkResult)>> callbacks_;
};

}  // namespace tdist
