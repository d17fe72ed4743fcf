#include "tdist/future.h"

#include "tdist/errors.h"
#include "util/error_context.h"
#include "util/logging.h"

namespace tdist {

bool Future::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool Future::has_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && error_;
}

std::exception_ptr Future::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Future::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });  // the operation behind it has a deadline
  if (error_) std::rethrow_exception(error_);
}

const std::vector<Tensor>& Future::value() {
  wait();
  return value_;
}

void Future::mark_completed(std::vector<Tensor> value) { complete(std::move(value), nullptr); }

void Future::set_error(std::exception_ptr error) { complete({}, std::move(error)); }

void Future::complete(std::vector<Tensor> value, std::exception_ptr error) {
  std::vector<std::function<void(Future&)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) throw DistError("Future: completed twice");
    done_ = true;
    value_ = std::move(value);
    error_ = std::move(error);
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
  for (auto& cb : callbacks) cb(*this);
}

void Future::add_done_callback(std::function<void(Future&)> callback) {
  auto safe = [callback = std::move(callback)](Future& f) {
    try {
      callback(f);
    } catch (...) {
      TDIST_LOG(LogLevel::Error, "a Future done-callback threw: " << error_message(std::current_exception()));
    }
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      callbacks_.push_back(std::move(safe));
      return;
    }
  }
  safe(*this);
}

std::shared_ptr<Future> Future::then(std::function<void(Future&)> callback) {
  auto next = std::make_shared<Future>();
  add_done_callback([next, callback = std::move(callback)](Future& self) {
    try {
      callback(self);
      std::exception_ptr err = self.exception();
      if (err)
        next->set_error(err);
      else
        next->mark_completed(self.value_);
    } catch (...) {
      next->set_error(std::current_exception());
    }
  });
  return next;
}

const char* work_result_name(WorkResult result) {
  switch (result) {
    case WorkResult::SUCCESS: return "SUCCESS";
    case WorkResult::TIMEOUT: return "TIMEOUT";
    case WorkResult::COMM_ERROR: return "COMM_ERROR";
    case WorkResult::UNKNOWN: return "UNKNOWN";
  }
  return "UNKNOWN";
}

bool WorkResultFuture::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

WorkResult WorkResultFuture::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return result_;
}

void WorkResultFuture::mark_completed(WorkResult result) {
  std::vector<std::function<void(WorkResult)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) throw DistError("WorkResultFuture: completed twice");
    done_ = true;
    result_ = result;
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
  for (auto& cb : callbacks) cb(result);
}

void WorkResultFuture::add_done_callback(std::function<void(WorkResult)> callback) {
  auto safe = [callback = std::move(callback)](WorkResult r) {
    try {
      callback(r);
    } catch (...) {
      TDIST_LOG(LogLevel::Error, "a WorkResultFuture callback threw: " << error_message(std::current_exception()));
    }
  };
  WorkResult r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      callbacks_.push_back(std::move(safe));
      return;
    }
    r = result_;
  }
  safe(r);
}

}  // namespace tdist
