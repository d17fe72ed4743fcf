// The progress thread of a group: runs its collectives one at a time, in
// issue order (the order every rank issues them in). A blocking call may run
// its collective on its own thread instead when the queue is idle, and a
// thread that waits for a queued work without a timeout runs the queue up to
// it when the thread is not busy (run_through). The thread starts with the
// first queued item: a group used only by blocking calls (most subgroups of a
// DeviceMesh) costs no thread.
//
// Callers of push() and claim_inline() are serialised by the backend (its
// issue lock); the queue's thread and waiters in run_through take items under
// the mutex. The idle check and its release are atomics rather than the
// mutex: they run around every blocking collective, whose latency is a few
// hundred nanoseconds. Whoever takes an item (the thread, a waiter) sets
// busy_ before the count drops, under the mutex, and only when busy_ was
// clear: so at most one item runs at a time, in order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "util/thread_name.h"
#include "work/pending_work.h"

namespace tdist {

class WorkQueue final : public WorkRunner, public std::enable_shared_from_this<WorkQueue> {
 public:
  WorkQueue() = default;
  ~WorkQueue() override { stop(nullptr); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // `run` executes on the queue's thread, or on a thread waiting for `work`
  // or a later item when `any_thread`, and must finish `work` itself.
  void push(std::shared_ptr<PendingWork> work, std::function<void()> run, bool any_thread = true) {
    if (any_thread) work->set_runner(weak_from_this());
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopped_.load(std::memory_order_relaxed)) {
        // Only here, under mu_ and not stopped: stop() reads thread_ after
        // setting stopped_ under mu_, when nothing can start it any more.
        if (!thread_.joinable()) {
          thread_ = std::thread([this] { loop(); });
          name_thread(thread_, "tdist-ops");
        }
        items_.push_back({std::move(work), std::move(run), any_thread});
        queued_.fetch_add(1, std::memory_order_seq_cst);
        cv_.notify_one();
        return;
      }
    }
    work->finish(stop_error_);
  }

  // Claims the right to run the next item on the calling thread: true when
  // nothing is queued or running (so issue order holds); the queue's thread
  // then starts nothing until release_inline(). Nothing can be queued
  // meanwhile except by the caller's own issuers, which wait for this call.
  //
  // No compare-and-swap (a locked instruction, a fifth of the issuing cost of
  // a blocking 8-byte all_reduce): the thread sets busy_ only for an item it
  // takes, and only the issuers (serialised, and this one of them) add items.
  // queued_ == 0 read after the thread's decrement shows the busy_ it set
  // before it; once nothing is queued and nothing runs, nobody else can set
  // busy_ until this caller's issue lock is released, after the store below.
  bool claim_inline() {
    if (stopped_.load(std::memory_order_acquire) || queued_.load(std::memory_order_acquire) != 0) return false;
    if (busy_.load(std::memory_order_acquire)) return false;
    busy_.store(true, std::memory_order_relaxed);
    return true;
  }
  void release_inline() {
    busy_.store(false, std::memory_order_seq_cst);
    // Items queued meanwhile may start now. Only then: waking the idle thread
    // after every blocking call costs a context switch each time. Taking the
    // mutex orders this with the thread's check of busy_ (it either has not
    // checked yet, or already waits and gets the notification).
    if (queued_.load(std::memory_order_seq_cst) != 0) {
      { std::lock_guard<std::mutex> lock(mu_); }
      cv_.notify_one();
    }
  }

  void run_through(const PendingWork& target) override {
    for (;;) {
      Item item;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_.load(std::memory_order_relaxed) || items_.empty() || busy_.load(std::memory_order_seq_cst))
          return;
        // Only items that may run here, and only when the target is among them.
        auto it = items_.begin();
        while (it != items_.end() && it->any_thread && it->work.get() != &target) ++it;
        if (it == items_.end() || !it->any_thread || !items_.front().any_thread) return;
        item = std::move(items_.front());
        items_.pop_front();
        busy_.store(true, std::memory_order_seq_cst);  // as loop(): before the count drops
        queued_.fetch_sub(1, std::memory_order_seq_cst);
      }
      const bool last = item.work.get() == &target;
      item.run();
      busy_.store(false, std::memory_order_seq_cst);
      // The thread waits for busy_ to clear before it takes the next item.
      if (queued_.load(std::memory_order_seq_cst) != 0) {
        { std::lock_guard<std::mutex> lock(mu_); }
        cv_.notify_one();
      }
      if (last) return;
    }
  }

  // Stops the thread once the running item ends; queued items fail with
  // `error`. An item a waiter runs (run_through) ends on the waiter's thread.
  void stop(std::exception_ptr error) {
    std::deque<Item> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_.load(std::memory_order_relaxed)) return;
      stopped_.store(true, std::memory_order_release);
      stop_error_ = error;
      dropped.swap(items_);
      queued_.store(0, std::memory_order_seq_cst);
      cv_.notify_one();
    }
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    for (auto& item : dropped) item.work->finish(error);
  }

 private:
  struct Item {
    std::shared_ptr<PendingWork> work;
    std::function<void()> run;
    bool any_thread = true;  // false: only the queue's thread may run it (device operations)
  };
  void loop() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] {
          return stopped_.load(std::memory_order_relaxed) ||
                 (!items_.empty() && !busy_.load(std::memory_order_seq_cst));
        });
        if (stopped_.load(std::memory_order_relaxed)) return;
        item = std::move(items_.front());
        items_.pop_front();
        // Busy before the count drops: a claim that sees no item queued must
        // then see this one running.
        busy_.store(true, std::memory_order_seq_cst);
        queued_.fetch_sub(1, std::memory_order_seq_cst);
      }
      item.run();
      busy_.store(false, std::memory_order_release);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;     // guarded by mu_
  std::atomic<size_t> queued_{0};  // items_.size(), readable without mu_
  std::atomic<bool> stopped_{false};
  std::atomic<bool> busy_{false};  // an item runs, on the queue's thread or inline
  std::exception_ptr stop_error_;
  std::thread thread_;  // started by the first push()
};

}  // namespace tdist
