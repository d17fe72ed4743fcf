// The progress thread of a group: runs its collectives one at a time, in
// issue order (the order every rank issues them in). A blocking call may run
// its collective on its own thread instead when the queue is idle.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "tdist/work.h"

namespace tdist {

class WorkQueue {
 public:
  WorkQueue() : thread_([this] { loop(); }) {}
  ~WorkQueue() { stop(nullptr); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // `run` executes on the queue's thread and must finish `work` itself.
  void push(std::shared_ptr<Work> work, std::function<void()> run) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopped_) {
        items_.push_back({std::move(work), std::move(run)});
        cv_.notify_one();
        return;
      }
    }
    work->finish(stop_error_);
  }

  // Claims the right to run the next item on the calling thread: true when
  // nothing is queued or running (so issue order holds); the queue's thread
  // then starts nothing until release_inline().
  bool claim_inline() {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || running_ || !items_.empty()) return false;
    running_ = true;
    return true;
  }
  void release_inline() {
    bool queued;
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
      queued = !items_.empty();
    }
    // Items queued meanwhile may start now. Only then: waking the idle
    // thread after every blocking call costs a context switch each time.
    if (queued) cv_.notify_one();
  }

  // Stops the thread once the running item ends; queued items fail with `error`.
  void stop(std::exception_ptr error) {
    std::deque<Item> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      stop_error_ = error;
      dropped.swap(items_);
      cv_.notify_one();
    }
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    for (auto& item : dropped) item.work->finish(error);
  }

 private:
  struct Item {
    std::shared_ptr<Work> work;
    std::function<void()> run;
  };
  void loop() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopped_ || (!items_.empty() && !running_); });
        if (stopped_) return;
        item = std::move(items_.front());
        items_.pop_front();
        running_ = true;
      }
      item.run();
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool stopped_ = false;
  bool running_ = false;  // an item runs, on the queue's thread or inline
  std::exception_ptr stop_error_;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace tdist
