#include "backends/work_queue.h"

#include <pthread.h>

#include <algorithm>
#include <new>
#include <vector>

#include "util/settings.h"

namespace tdist {

namespace {

// Every live queue of the process, for start_deferred_slow (a blocking call
// while some queue holds unwoken items: rare). Its lock is never taken under
// a queue's mutex.
struct Registry {
  std::mutex mu;
  std::vector<WorkQueue*> queues;
};
Registry*& registry_slot() {
  static Registry* r = nullptr;
  return r;
}
Registry& registry() {
  static const bool made = [] {
    registry_slot() = new Registry;  // never destroyed: queues may outlive static destruction
    // A forked child has none of the parent's threads: its queues are not
    // usable there, and a lock another thread held at the fork stays held.
    // The child starts with an empty registry and nothing unwoken.
    pthread_atfork(nullptr, nullptr, [] { WorkQueue::forget_after_fork(); });
    return true;
  }();
  (void)made;
  return *registry_slot();
}

}  // namespace

std::atomic<int> WorkQueue::unwoken_queues_{0};
std::atomic<uint32_t> WorkQueue::forks_{0};

void WorkQueue::forget_after_fork() {
  registry_slot() = new Registry;  // the parent's is left as it was (its lock may be held)
  forks_.fetch_add(1, std::memory_order_relaxed);
  unwoken_queues_.store(0, std::memory_order_relaxed);
}

std::chrono::microseconds WorkQueue::default_nap() {
  return std::chrono::microseconds(settings::get<"TDIST_ASYNC_DEFER_US">());
}

WorkQueue::WorkQueue(std::chrono::microseconds nap) : nap_(nap) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.queues.push_back(this);
}

WorkQueue::~WorkQueue() {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    // Absent in a forked child whose parent made it (forget_after_fork).
    auto it = std::find(r.queues.begin(), r.queues.end(), this);
    if (it != r.queues.end()) r.queues.erase(it);
  }
  stop(nullptr);
}

void WorkQueue::start_deferred_slow(const WorkQueue* except) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (WorkQueue* q : r.queues)
    if (q != except) q->wake_if_unwoken();
}

}  // namespace tdist
