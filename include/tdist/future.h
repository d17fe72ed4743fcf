// The future of an operation (Work::get_future): completes with the
// operation's output tensors, or its error; then-callbacks chain on it.
#pragma once

#include <condition_variable>
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

}  // namespace tdist
