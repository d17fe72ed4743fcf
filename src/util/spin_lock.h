// A lock for critical sections of a few instructions on hot paths: taking it
// is one atomic exchange and releasing it a plain store, where a std::mutex
// releases with a second locked instruction (each drains the store buffer: tens
// of nanoseconds on the VMs measured, per blocking collective). A waiter
// pauses briefly, then yields its core: never an unbounded spin, the holder
// may be descheduled with more threads than cores.
#pragma once

#include <sched.h>

#include <atomic>

#include "util/cpu_relax.h"

namespace tdist {

class SpinLock {
 public:
  void lock() {
    for (unsigned spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins++ < kPauses)
          cpu_relax();
        else
          sched_yield();
      }
    }
  }
  bool try_lock() { return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned kPauses = 64;
  std::atomic<bool> locked_{false};
};

}  // namespace tdist
