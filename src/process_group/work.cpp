#include "tdist/work.h"

#include "tdist/errors.h"

namespace tdist {

Work::Work(std::string op, uint64_t sequence_number, std::string label)
    : op_(std::move(op)),
      seq_(sequence_number),
      label_(label.empty() ? nullptr : std::make_shared<const std::string>(std::move(label))) {}

Work::Work(std::string op, uint64_t sequence_number, std::shared_ptr<const std::string> label)
    : op_(std::move(op)), seq_(sequence_number), label_(std::move(label)) {}

// error_ is written before done_ turns true (release) and never after, so a
// reader that saw done_ (acquire) reads it without the mutex.
bool Work::is_completed() const { return done_.load(std::memory_order_acquire); }

bool Work::is_success() const { return done_.load(std::memory_order_acquire) && !error_; }

std::exception_ptr Work::exception() const { return done_.load(std::memory_order_acquire) ? error_ : nullptr; }

bool Work::wait(std::chrono::milliseconds timeout) {
  if (done_.load(std::memory_order_acquire)) {
    if (error_) std::rethrow_exception(error_);
    return true;
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [&] { return done_.load(std::memory_order_relaxed); };
  if (timeout == kNoTimeout) {
    // Operations carry their own deadline (the group timeout), so this ends.
    cv_.wait(lock, done);
  } else if (!cv_.wait_for(lock, timeout, done)) {
    throw DistBackendError((label_ ? *label_ + ": " : std::string()) + op_ + " #" + std::to_string(seq_) +
                           ": Work::wait timed out after " +
                           std::to_string(timeout.count()) + " ms (the operation is still in progress)");
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

int Work::source_rank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return source_rank_;
}

void Work::set_source_rank(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  source_rank_ = rank;
}

void Work::finish(std::exception_ptr error) {
  std::shared_ptr<Future> future;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.load(std::memory_order_relaxed)) return;
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
    future = future_;
  }
  cv_.notify_all();
  if (future) complete_future(*future);
}

void Work::complete_future(Future& future) {
  if (error_)
    future.set_error(error_);
  else
    future.mark_completed(result_);
}

std::shared_ptr<Future> Work::get_future() {
  std::shared_ptr<Future> future;
  bool done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (future_) return future_;
    future_ = future = std::make_shared<Future>();
    done = done_.load(std::memory_order_relaxed);
  }
  // finish() ran before the future existed: complete it here (done_ never reverts).
  if (done) complete_future(*future);
  return future;
}

std::shared_ptr<Work> Work::completed(std::string op, uint64_t seq) {
  auto w = std::make_shared<Work>(std::move(op), seq);
  w->finish();
  return w;
}

}  // namespace tdist
