// The progress thread of a group: runs its collectives one at a time, in
// issue order (the order every rank issues them in). A blocking call may run
// its collective on its own thread instead when the queue is idle, and a
// thread that waits for a queued work without a timeout runs the queue up to
// it when the thread is not busy (run_through). The thread starts with the
// first queued item: a group used only by blocking calls (most subgroups of a
// DeviceMesh) costs no thread.
//
// Deferred starts. Waking the thread for a small async operation costs more
// than the operation (two context switches, and on a machine with no idle
// core the thread takes one from a rank), and the caller most often waits for
// it at once, running it itself. So a small async item (push's `deferrable`)
// does not wake the thread when the thread naps: after an item, and while
// deferrable items keep coming, it sleeps at most its nap at a time
// (TDIST_ASYNC_DEFER_US) and then looks at the queue on its own. The item
// then starts at the latest one nap later in the background, or at once
// when something else needs it: a wait
// on it (run_through), a poll or a bounded wait (start_soon), a later item
// that is not deferrable, or any blocking call or point-to-point operation in
// this process (start_deferred_elsewhere: a rank blocked in another group may
// be what a peer needs this one for).
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
#include <chrono>
#include <condition_variable>
#include <cstdint>
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
  // `nap`: the longest a deferred item waits for the thread (see above); 0:
  // nothing is deferred, every item wakes the thread.
  explicit WorkQueue(std::chrono::microseconds nap = default_nap());
  ~WorkQueue() override;
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // TDIST_ASYNC_DEFER_US.
  static std::chrono::microseconds default_nap();

  // `run` executes on the queue's thread, or on a thread waiting for `work`
  // or a later item when `any_thread`, and must finish `work` itself.
  // `deferrable`: it need not wake the thread (Deferred starts, above).
  void push(std::shared_ptr<PendingWork> work, std::function<void()> run, bool any_thread = true,
            bool deferrable = false) {
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
        if (deferrable && any_thread && nap_.count() > 0) {
          naps_left_ = kLingerNaps;
          ++deferrable_pushes_;
          if (napping_) {
            mark_unwoken();
            return;
          }
        }
        wake_locked();
        return;
      }
    }
    work->finish(stop_error_);
  }

  // Starts every item that waits unwoken, in every queue of this process but
  // `except` (null: in all): for a call that is about to block.
  static void start_deferred_elsewhere(const WorkQueue* except) {
    int queues = unwoken_queues_.load(std::memory_order_relaxed);
    if (queues == 0) return;
    // The waiter of a deferred item runs it itself: its own queue does not count.
    if (except != nullptr && except->unwoken_.load(std::memory_order_relaxed)) --queues;
    if (queues > 0) start_deferred_slow(except);
  }

  // In a forked child (pthread_atfork): the parent's queues are not this process's.
  static void forget_after_fork();

  // How many queues of this process hold items that wait unwoken (for tests).
  static int queues_with_unwoken_items() { return unwoken_queues_.load(std::memory_order_seq_cst); }
  // Whether a deferrable item pushed now would wait unwoken (for tests).
  bool napping() {
    std::lock_guard<std::mutex> lock(mu_);
    return napping_;
  }

  // A work of this queue is polled or waited for with a bound: if it waits
  // unwoken, the thread starts it now.
  void start_soon(const PendingWork& /*work*/) override { wake_if_unwoken(); }

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
    start_deferred_elsewhere(this);
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
        if (items_.empty()) clear_unwoken();
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
      clear_unwoken();
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
  // After the last deferrable item, the thread naps this many times before it
  // sleeps until woken (10 ms at the default nap).
  static constexpr int kLingerNaps = 20;

  void loop() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
          if (stopped_.load(std::memory_order_relaxed)) return;
          if (!items_.empty() && !busy_.load(std::memory_order_seq_cst)) break;
          if (naps_left_ > 0) {
            napping_ = true;
            const uint64_t seen = deferrable_pushes_;
            cv_.wait_for(lock, nap_);
            if (deferrable_pushes_ == seen && items_.empty()) --naps_left_;
          } else {
            napping_ = false;
            cv_.wait(lock);
          }
        }
        item = std::move(items_.front());
        items_.pop_front();
        if (items_.empty()) clear_unwoken();
        // Busy before the count drops: a claim that sees no item queued must
        // then see this one running.
        busy_.store(true, std::memory_order_seq_cst);
        queued_.fetch_sub(1, std::memory_order_seq_cst);
      }
      item.run();
      busy_.store(false, std::memory_order_release);
    }
  }

  // Under mu_: wakes the thread, which then takes what is queued.
  void wake_locked() {
    clear_unwoken();
    cv_.notify_one();
  }
  // Under mu_: an item waits that the thread was not woken for. Counted in
  // unwoken_queues_ only by queues of this process (not a forked parent's).
  void mark_unwoken() {
    if (unwoken_.load(std::memory_order_relaxed)) return;
    unwoken_.store(true, std::memory_order_relaxed);
    if (born_in_ == forks_.load(std::memory_order_relaxed)) unwoken_queues_.fetch_add(1, std::memory_order_seq_cst);
  }
  void clear_unwoken() {
    if (!unwoken_.load(std::memory_order_relaxed)) return;
    unwoken_.store(false, std::memory_order_relaxed);
    if (born_in_ == forks_.load(std::memory_order_relaxed)) unwoken_queues_.fetch_sub(1, std::memory_order_seq_cst);
  }
  static void start_deferred_slow(const WorkQueue* except);
  // Wakes the thread if items wait unwoken; takes mu_.
  void wake_if_unwoken() {
    if (!unwoken_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (unwoken_.load(std::memory_order_relaxed)) wake_locked();
  }

  // Queues of this process with items waiting unwoken: a blocking call reads
  // it (one load) to know whether it has anything to start first.
  static std::atomic<int> unwoken_queues_;
  // Forks this process has been the child of (forget_after_fork), and the
  // count when this queue was made.
  static std::atomic<uint32_t> forks_;
  const uint32_t born_in_ = forks_.load(std::memory_order_relaxed);

  const std::chrono::microseconds nap_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;     // guarded by mu_
  // Guarded by mu_: whether the thread looks at the queue within nap_
  // without a wake-up (it naps, or runs an item and will look after it), how
  // many more naps it takes before it sleeps until woken, and a count of
  // deferrable pushes that tells it whether one came during a nap.
  bool napping_ = false;
  int naps_left_ = 0;
  uint64_t deferrable_pushes_ = 0;
  std::atomic<bool> unwoken_{false};  // written under mu_; read without it by start_soon
  std::atomic<size_t> queued_{0};  // items_.size(), readable without mu_
  std::atomic<bool> stopped_{false};
  std::atomic<bool> busy_{false};  // an item runs, on the queue's thread or inline
  std::exception_ptr stop_error_;
  std::thread thread_;  // started by the first push()
};

}  // namespace tdist
