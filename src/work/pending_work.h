// The Work of the CPU backends: pending until its backend finishes it, from
// any thread; waited for on a futex word; its future made only when asked.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "tdist/work.h"

namespace tdist {

class PendingWork;

// Who can run a pending work on the thread that waits for it: a backend's
// queue of operations its progress thread has not started yet. A waiter that
// runs them itself does not sleep until that thread gets to them and then
// wake again (two thread wake-ups, most of a small operation's time).
class WorkRunner {
 public:
  virtual ~WorkRunner() = default;
  // Runs, on the calling thread and in issue order, what is queued up to and
  // including `work`, unless the queue's own thread is running an item (or
  // `work` is not queued, or must run on that thread): then returns at once.
  virtual void run_through(const PendingWork& work) = 0;
  // `work` is polled, waited for with a bound, or given a future: if its
  // start was deferred (WorkQueue: Deferred starts), it starts now on the
  // queue's thread.
  virtual void start_soon(const PendingWork& work) = 0;
};

class PendingWork : public Work {
 public:
  // `label` ("rank 3 in group default_pg") prefixes its messages.
  PendingWork(std::string op, uint64_t sequence_number, std::string label = "");
  // The same, sharing the label with the other works of its group (no copy per operation).
  PendingWork(std::string op, uint64_t sequence_number, std::shared_ptr<const std::string> label);

  // A work not yet completed starts now if its start was deferred (WorkRunner::start_soon).
  bool is_completed() const override;
  bool completed_now() const override { return done(); }
  bool is_success() const override;
  std::exception_ptr exception() const override;
  // Without a timeout, a work still queued runs on the calling thread
  // (WorkRunner); with one, it only waits, so the wait ends in time.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  int source_rank() const override;
  std::shared_ptr<Future> get_future() override;
  const std::vector<Tensor>& result() const override { return result_; }
  const std::string& op_name() const override { return op_; }
  uint64_t sequence_number() const override { return seq_; }

  // Completes the work (with an error, or successfully).
  void finish(std::exception_ptr error = nullptr);
  // The same for a work that no other thread can see yet (a blocking call
  // that ran on its caller's thread before returning it): nobody can wait on
  // it or have asked for its future, so it needs neither the lock nor a wake-up.
  void finish_unshared(std::exception_ptr error = nullptr);
  void set_source_rank(int rank);
  void set_result(std::vector<Tensor> result) { result_ = std::move(result); }
  // The queue it waits in, set before it is queued.
  void set_runner(std::weak_ptr<WorkRunner> runner) { runner_ = std::move(runner); }
  // Makes a finished work that nobody else holds pending again, for another
  // operation: no allocation (result_ keeps its capacity).
  void reuse(const char* op, uint64_t seq, std::span<const Tensor> result);

 private:
  void complete_future(Future& future);
  void start_soon() const {
    if (auto runner = runner_.lock()) runner->start_soon(*this);
  }
  bool done() const { return state_.load(std::memory_order_acquire) == kDone; }

  std::string op_;
  const char* op_literal_ = nullptr;  // what reuse() last copied into op_
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
  int source_rank_ = -1;
  std::exception_ptr error_;
  std::vector<Tensor> result_;
  std::shared_ptr<Future> future_;
  std::weak_ptr<WorkRunner> runner_;  // empty: nobody to run it but its backend
};

}  // namespace tdist
