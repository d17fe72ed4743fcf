// SpinLock: mutual exclusion under contention from more threads than cores
// (waiters must yield, or the holder never runs again on a 2-core machine).
#include "util/spin_lock.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace tdist::testing {
namespace {

TEST(SpinLock, ExcludesAndLetsManyThreadsThrough) {
  SpinLock lock;
  long counter = 0;  // plain: only the lock orders the increments
  constexpr int kThreads = 8, kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard<SpinLock> guard(lock);
        long seen = counter;
        if (i % 512 == 0) std::this_thread::yield();  // get preempted while holding it, now and then
        counter = seen + 1;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter, static_cast<long>(kThreads) * kRounds);
}

TEST(SpinLock, TryLockFailsWhileHeld) {
  SpinLock lock;
  ASSERT_TRUE(lock.try_lock());
  bool other = true;
  std::thread([&] { other = lock.try_lock(); }).join();
  EXPECT_FALSE(other);
  lock.unlock();
  std::thread([&] {
    other = lock.try_lock();
    if (other) lock.unlock();
  }).join();
  EXPECT_TRUE(other);
}

}  // namespace
}  // namespace tdist::testing
