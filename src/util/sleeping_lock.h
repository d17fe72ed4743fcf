// A mutex whose free path is inline: one compare-exchange to take it, one
// exchange to release it, where std::mutex goes through pthread's calls
// (about 60 instructions a pair, per blocking call of a backend that takes its
// issue lock once per call). Unlike SpinLock (util/spin_lock.h) it may be
// held for long (a blocking MPI call): a waiter spins briefly, then sleeps
// on the word (futex) until the holder lets go. Not recursive, not fair.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "util/cpu_relax.h"
#include "util/futex.h"

namespace tdist {

class SleepingLock {
 public:
  void lock() {
    uint32_t expected = kFree;
    if (!state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire)) lock_contended();
  }
  bool try_lock() {
    uint32_t expected = kFree;
    return state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire);
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kWaitedFor) futex_wake(&state_, 1);
  }

 private:
  // The word says kWaitedFor while anyone may sleep on it, so that the
  // holder's unlock wakes one; a woken waiter takes it as kWaitedFor again
  // (others may still sleep), costing at most one spare wake-up.
  [[gnu::noinline]] void lock_contended() {
    for (unsigned spins = 0; spins < kSpins; ++spins) {
      cpu_relax();
      if (state_.load(std::memory_order_relaxed) == kFree && try_lock()) return;
    }
    while (state_.exchange(kWaitedFor, std::memory_order_acquire) != kFree)
      futex_wait(&state_, kWaitedFor, std::chrono::seconds(1));  // re-checked on waking, whatever woke it
  }

  static constexpr uint32_t kFree = 0, kHeld = 1, kWaitedFor = 2;
  static constexpr unsigned kSpins = 64;
  std::atomic<uint32_t> state_{kFree};
};

}  // namespace tdist
