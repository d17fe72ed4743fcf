// SpinLock and SleepingLock: mutual exclusion under contention from more
// threads than cores (waiters must yield or sleep, or the holder never runs
// again on a 2-core machine); and SleepingLock's waiter sleeps rather than
// spins while the holder keeps it for long, as the mpi backend's issue lock
// is kept across a blocking call.
#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "util/sleeping_lock.h"
#include "util/spin_lock.h"

namespace tdist::testing {
namespace {

template <typename Lock>
class Locks : public ::testing::Test {};
using LockTypes = ::testing::Types<SpinLock, SleepingLock>;
TYPED_TEST_SUITE(Locks, LockTypes);

TYPED_TEST(Locks, ExcludeAndLetManyThreadsThrough) {
  TypeParam lock;
  long counter = 0;  // plain: only the lock orders the increments
  constexpr int kThreads = 8, kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard<TypeParam> guard(lock);
        long seen = counter;
        if (i % 512 == 0) std::this_thread::yield();  // get preempted while holding it, now and then
        counter = seen + 1;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter, static_cast<long>(kThreads) * kRounds);
}

TYPED_TEST(Locks, TryLockFailsWhileHeld) {
  TypeParam lock;
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

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The holder keeps the lock for 300 ms of wall time; the waiter's own CPU
// time over its wait stays far below that only if it sleeps. (A loaded
// machine can only lower the waiter's CPU time: it asserts no wall time.)
TEST(SleepingLock, AWaiterSleepsWhileTheHolderKeepsIt) {
  SleepingLock lock;
  lock.lock();
  std::atomic<bool> waiting{false}, acquired{false};
  double waiter_cpu = 0;
  std::thread waiter([&] {
    const double start = thread_cpu_seconds();
    waiting = true;
    lock.lock();
    waiter_cpu = thread_cpu_seconds() - start;
    acquired = true;
    lock.unlock();
  });
  while (!waiting) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(acquired) << "the waiter took a lock that was held";
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(acquired);
  EXPECT_LT(waiter_cpu, 0.15) << "the waiter spent " << waiter_cpu << " s of CPU waiting 0.3 s: it spun";
}

}  // namespace
}  // namespace tdist::testing
