#include "work/pending_work.h"

#include <algorithm>
#include <string_view>

#include "tdist/errors.h"
#include "tensor/view_list.h"
#include "util/deadline.h"
#include "util/futex.h"

namespace tdist {

PendingWork::PendingWork(std::string op, uint64_t sequence_number, std::string label)
    : op_(std::move(op)),
      seq_(sequence_number),
      label_(label.empty() ? nullptr : std::make_shared<const std::string>(std::move(label))) {}

PendingWork::PendingWork(std::string op, uint64_t sequence_number, std::shared_ptr<const std::string> label)
    : op_(std::move(op)), seq_(sequence_number), label_(std::move(label)) {}

// error_ is written before state_ turns kDone (release) and never after, so a
// reader that saw kDone (acquire) reads it without the mutex.
bool PendingWork::is_completed() const {
  if (done()) return true;
  start_soon();  // a caller that polls may never wait
  return false;
}

bool PendingWork::is_success() const { return done() && !error_; }

std::exception_ptr PendingWork::exception() const { return done() ? error_ : nullptr; }

bool PendingWork::wait(std::chrono::milliseconds timeout) {
  if (done()) {  // a blocking call's work, finished before it was returned
    if (error_) std::rethrow_exception(error_);
    return true;
  }
  // Operations carry their own deadline (the group timeout), so a wait
  // without a timeout ends too.
  const Deadline deadline = timeout == kNoTimeout ? Deadline::never() : Deadline::after(timeout);
  if (!done()) {
    if (auto runner = runner_.lock()) deadline.is_never() ? runner->run_through(*this) : runner->start_soon(*this);
  }
  for (;;) {
    uint32_t s = state_.load(std::memory_order_acquire);
    if (s == kDone) break;
    if (deadline.expired())
      throw DistBackendError((label_ ? *label_ + ": " : std::string()) + op_ + " #" + std::to_string(seq_) +
                             ": Work::wait: Timed out after " + std::to_string(timeout.count()) +
                             " ms (the operation is still in progress)");
    // Announce the sleeper; a finish in between turns the state kDone and the
    // futex call returns at once (the value differs).
    if (s == kPending && !state_.compare_exchange_weak(s, kWaitedFor, std::memory_order_acq_rel)) continue;
    futex_wait(&state_, kWaitedFor, deadline.is_never() ? std::chrono::seconds(1) : deadline.remaining());
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

int PendingWork::source_rank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return source_rank_;
}

void PendingWork::set_source_rank(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  source_rank_ = rank;
}

void PendingWork::finish(std::exception_ptr error) {
  std::shared_ptr<Future> future;
  uint32_t was;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done()) return;
    error_ = std::move(error);
    was = state_.exchange(kDone, std::memory_order_acq_rel);
    future = future_;
  }
  if (was == kWaitedFor) futex_wake(&state_);
  if (future) complete_future(*future);
}

void PendingWork::finish_unshared(std::exception_ptr error) {
  if (done()) return;
  error_ = std::move(error);
  state_.store(kDone, std::memory_order_release);
}

void PendingWork::reuse(const char* op, uint64_t seq, std::span<const Tensor> result) {
  // Operation names are literals: the same pointer is the same name, and a
  // loop of one collective copies nothing (strlen and a copy per call otherwise).
  if (op != op_literal_) {
    op_ = op;
    op_literal_ = op;
  }
  seq_ = seq;
  // Each reset only where there is something to reset: a blocking call in a
  // loop finds all of them empty and its result the view it had.
  if (error_) error_ = nullptr;
  source_rank_ = -1;
  if (future_) future_.reset();
  runner_.reset();
  if (!same_views(result_, result)) result_.assign(result.begin(), result.end());
  state_.store(kPending, std::memory_order_relaxed);
}

void PendingWork::complete_future(Future& future) {
  if (error_)
    future.set_error(error_);
  else
    future.mark_completed(result_);
}

std::shared_ptr<Future> PendingWork::get_future() {
  std::shared_ptr<Future> future;
  bool finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (future_) return future_;
    future_ = future = std::make_shared<Future>();
    finished = done();
  }
  if (!finished) start_soon();  // whoever holds the future may never wait
  // finish() ran before the future existed: complete it here (kDone never reverts).
  if (finished) complete_future(*future);
  return future;
}

std::shared_ptr<Work> Work::completed(std::string op, uint64_t seq) {
  auto w = std::make_shared<PendingWork>(std::move(op), seq);
  w->finish_unshared();
  return w;
}

WorkResult Work::result_of(const std::exception_ptr& error) {
  if (!error) return WorkResult::SUCCESS;
  // An operation's deadline (transport, shared memory, monitored_barrier)
  // fails with torch's phrase "Timed out" ("timed out in monitoredBarrier");
  // the error types do not tell a timeout apart.
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    const std::string_view text(e.what());
    const bool timed_out = text.find("Timed out") != std::string_view::npos ||
                           text.find("timed out") != std::string_view::npos;
    return timed_out ? WorkResult::TIMEOUT : WorkResult::COMM_ERROR;
  } catch (...) {
    return WorkResult::COMM_ERROR;
  }
}

std::shared_ptr<WorkResultFuture> Work::get_future_result() {
  auto out = std::make_shared<WorkResultFuture>();
  get_future()->add_done_callback([out](Future& f) { out->mark_completed(result_of(f.exception())); });
  return out;
}

}  // namespace tdist
