// WorkQueue: a group's operations run one at a time and in issue order,
// whether its thread runs them or a thread that waits for one of them
// (run_through); a bounded wait and an item that must stay on the queue's
// thread (a device operation) are never run by the waiter.
#include "backends/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "tdist/errors.h"

namespace tdist::testing {
namespace {

thread_local bool is_waiter = false;

TEST(WorkQueue, ItemsRunOnceInIssueOrderWhoeverRunsThem) {
  auto queue = std::make_shared<WorkQueue>();
  constexpr int kItems = 400, kWaiters = 4;
  std::vector<std::shared_ptr<PendingWork>> works(kItems);
  std::atomic<int> published{0};
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> by_waiters{0};
  std::mutex mu;
  std::vector<int> order;

  std::vector<std::thread> waiters;
  for (int k = 0; k < kWaiters; ++k)
    waiters.emplace_back([&, k] {
      is_waiter = true;
      for (int i = k; i < kItems; i += kWaiters) {
        while (published.load(std::memory_order_acquire) <= i) std::this_thread::yield();
        works[i]->wait();
      }
    });
  for (int i = 0; i < kItems; ++i) {
    auto work = std::make_shared<PendingWork>("all_reduce", static_cast<uint64_t>(i + 1));
    works[i] = work;
    queue->push(work, [&, i, work] {
      if (running.fetch_add(1) != 0) overlaps.fetch_add(1);
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
      }
      if (is_waiter) by_waiters.fetch_add(1);
      if (i % 7 == 0) std::this_thread::yield();  // let others try to take the next one meanwhile
      running.fetch_sub(1);
      work->finish();
    });
    published.store(i + 1, std::memory_order_release);
    if (i % 16 == 0) std::this_thread::yield();
  }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(order.size(), static_cast<size_t>(kItems));
  for (int i = 0; i < kItems; ++i) ASSERT_EQ(order[i], i) << "item " << i << " ran out of order";
  for (auto& w : works) EXPECT_TRUE(w->is_completed());
  // Who ran what depends on the scheduler; for the record only.
  std::printf("waiters ran %d of %d items\n", by_waiters.load(), kItems);
  queue->stop(nullptr);
}

TEST(WorkQueue, ABoundedWaitLeavesTheItemToTheQueue) {
  auto queue = std::make_shared<WorkQueue>();
  // As a blocking call running inline: the queue's thread starts nothing meanwhile.
  ASSERT_TRUE(queue->claim_inline());
  auto work = std::make_shared<PendingWork>("broadcast", 1);
  std::atomic<bool> ran{false};
  queue->push(work, [&, work] {
    ran = true;
    work->finish();
  });
  // Nothing can run the item while the queue is claimed, however loaded the machine: this wait times out.
  EXPECT_THROW(work->wait(std::chrono::milliseconds(20)), DistBackendError);
  EXPECT_FALSE(ran.load());
  queue->release_inline();
  work->wait();
  EXPECT_TRUE(ran.load());
  queue->stop(nullptr);
}

TEST(WorkQueue, AnItemForTheQueueThreadOnlyIsNeverRunByItsWaiter) {
  auto queue = std::make_shared<WorkQueue>();
  ASSERT_TRUE(queue->claim_inline());  // nothing starts until release
  auto device = std::make_shared<PendingWork>("all_reduce", 1);
  auto after = std::make_shared<PendingWork>("all_reduce", 2);
  std::thread::id device_on, after_on;
  queue->push(device, [&, device] {
    device_on = std::this_thread::get_id();
    device->finish();
  }, /*any_thread=*/false);
  queue->push(after, [&, after] {
    after_on = std::this_thread::get_id();
    after->finish();
  });
  std::thread::id waiter;
  std::thread t([&] {
    waiter = std::this_thread::get_id();
    after->wait();  // cannot run `after` before `device`, and may not run `device`
  });
  // Most often the waiter is asleep by now; if not, it waits after the
  // release: either way `device` may run on the queue's thread only, which is
  // all this checks (no timing is asserted).
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  queue->release_inline();
  t.join();
  EXPECT_TRUE(device->is_completed());
  EXPECT_TRUE(after->is_completed());
  EXPECT_NE(device_on, waiter);
  queue->stop(nullptr);
}

TEST(WorkQueue, WaitersOfAStoppedQueueGetItsError) {
  auto queue = std::make_shared<WorkQueue>();
  ASSERT_TRUE(queue->claim_inline());
  auto work = std::make_shared<PendingWork>("all_gather", 1);
  std::atomic<bool> ran{false};
  queue->push(work, [&, work] {
    ran = true;
    work->finish();
  });
  queue->stop(std::make_exception_ptr(DistBackendError("the process group was destroyed")));
  try {
    work->wait();
    FAIL() << "a dropped item's wait must fail";
  } catch (const DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("destroyed"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(ran.load());
}

}  // namespace
}  // namespace tdist::testing
