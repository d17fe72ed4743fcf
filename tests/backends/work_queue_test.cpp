// WorkQueue: a group's operations run one at a time and in issue order,
// whether its thread runs them or a thread that waits for one of them
// (run_through); a bounded wait and an item that must stay on the queue's
// thread (a device operation) are never run by the waiter. A deferred item
// (one pushed without waking the thread) starts on its own within a nap, or
// at once when polled, waited for, or when a call elsewhere is about to block.
#include "backends/work_queue.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

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
  // Naps of 50 µs: the thread also takes deferred items on its own, racing the waiters.
  auto queue = std::make_shared<WorkQueue>(std::chrono::microseconds(50));
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
    }, /*any_thread=*/true, /*deferrable=*/i % 3 != 0);
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

// A nap that no test outlives: what starts a deferred item here is what the test does.
constexpr std::chrono::microseconds kNoNap = std::chrono::hours(1);

// Pushes a deferrable item that sets `ran` and finishes `work`.
void push_deferrable(WorkQueue& queue, const std::shared_ptr<PendingWork>& work, std::atomic<bool>& ran) {
  queue.push(work, [&ran, work] {
    ran = true;
    work->finish();
  }, /*any_thread=*/true, /*deferrable=*/true);
}

// Runs one deferrable item through `queue` and waits for it: the thread was
// woken for it (it slept) and naps from then on (20 naps), so the next one is
// deferred once it has got back to its queue. Whether it was seen napping:
// with short naps a loaded machine may let them all pass first.
bool start_napping(WorkQueue& queue) {
  auto first = std::make_shared<PendingWork>("all_reduce", 1);
  std::atomic<bool> ran{false};
  push_deferrable(queue, first, ran);
  first->wait();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!queue.napping() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return queue.napping();
}

// Whether `ran` turns true within a bound no loaded machine reaches.
bool becomes_true(const std::atomic<bool>& ran) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!ran.load() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return ran.load();
}

// A queue whose thread naps for an hour, holding one deferred item (`work`,
// which sets `ran`): what starts it is what the test does.
struct OneDeferred {
  std::shared_ptr<WorkQueue> queue = std::make_shared<WorkQueue>(kNoNap);
  std::shared_ptr<PendingWork> work = std::make_shared<PendingWork>("all_reduce", 2);
  std::atomic<bool> ran{false};
  bool napped = start_napping(*queue);  // before the push: else the push wakes the thread
  OneDeferred() { push_deferrable(*queue, work, ran); }
};

TEST(WorkQueue, ADeferredItemNobodyWaitsForStartsWithinANap) {
  auto queue = std::make_shared<WorkQueue>(std::chrono::microseconds(500));
  (void)start_napping(*queue);  // if the naps are over, the push wakes the thread: the item still runs
  auto work = std::make_shared<PendingWork>("all_reduce", 2);
  std::atomic<bool> ran{false};
  push_deferrable(*queue, work, ran);
  // Looked at without starting anything: only the napping thread can run it.
  EXPECT_TRUE(becomes_true(ran)) << "a deferred item never started without a waiter";
  EXPECT_TRUE(work->completed_now());
  queue->stop(nullptr);
}

TEST(WorkQueue, PollingADeferredItemStartsIt) {
  OneDeferred d;
  ASSERT_TRUE(d.napped);
  auto& [queue, work, ran, napped] = d;
  EXPECT_EQ(WorkQueue::queues_with_unwoken_items(), 1);
  // The thread naps for an hour: the poll is what starts the item.
  (void)work->is_completed();
  EXPECT_TRUE(becomes_true(ran)) << "is_completed() did not start a deferred item";
  EXPECT_EQ(WorkQueue::queues_with_unwoken_items(), 0);
  queue->stop(nullptr);
}

TEST(WorkQueue, ABoundedWaitStartsADeferredItem) {
  OneDeferred d;
  ASSERT_TRUE(d.napped);
  auto& [queue, work, ran, napped] = d;
  // A bounded wait never runs the item itself; it wakes the thread, which does.
  EXPECT_TRUE(work->wait(std::chrono::seconds(60)));
  EXPECT_TRUE(ran.load());
  queue->stop(nullptr);
}

TEST(WorkQueue, ACallAboutToBlockElsewhereStartsDeferredItems) {
  OneDeferred d;
  ASSERT_TRUE(d.napped);
  auto other = std::make_shared<WorkQueue>(kNoNap);
  // As a blocking call in the other queue's group: the peer it waits for may
  // be waiting for this rank's deferred item.
  WorkQueue::start_deferred_elsewhere(other.get());
  EXPECT_TRUE(becomes_true(d.ran)) << "a blocking call elsewhere did not start a deferred item";
  d.queue->stop(nullptr);
  other->stop(nullptr);
}

TEST(WorkQueue, AnItemThatIsNotDeferrableWakesTheThreadForTheDeferredOnesBeforeIt) {
  OneDeferred d;
  ASSERT_TRUE(d.napped);
  auto& [queue, deferred, deferred_ran, napped] = d;
  auto large = std::make_shared<PendingWork>("all_reduce", 3);
  std::atomic<bool> large_ran{false};
  queue->push(large, [&, large] {
    large_ran = true;
    large->finish();
  });
  EXPECT_TRUE(becomes_true(large_ran));
  EXPECT_TRUE(deferred_ran.load()) << "issue order";
  EXPECT_EQ(WorkQueue::queues_with_unwoken_items(), 0);
  queue->stop(nullptr);
}

TEST(WorkQueue, StoppingFailsDeferredItemsAndForgetsThem) {
  OneDeferred d;
  ASSERT_TRUE(d.napped);
  auto& [queue, work, ran, napped] = d;
  EXPECT_EQ(WorkQueue::queues_with_unwoken_items(), 1);
  queue->stop(std::make_exception_ptr(DistBackendError("the process group was destroyed")));
  EXPECT_EQ(WorkQueue::queues_with_unwoken_items(), 0);
  EXPECT_THROW(work->wait(), DistBackendError);
  EXPECT_FALSE(ran.load());
}

// A forked child has none of its parent's threads: it counts none of the
// parent's deferred items, and its own queues defer and start as usual.
TEST(WorkQueue, AForkedChildStartsFromNoDeferredItems) {
  auto parents = std::make_shared<WorkQueue>(kNoNap);
  ASSERT_TRUE(start_napping(*parents));
  auto work = std::make_shared<PendingWork>("all_reduce", 2);
  std::atomic<bool> ran{false};
  push_deferrable(*parents, work, ran);
  ASSERT_EQ(WorkQueue::queues_with_unwoken_items(), 1);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    if (WorkQueue::queues_with_unwoken_items() != 0) code = 1;
    auto own = std::make_shared<WorkQueue>(kNoNap);
    auto mine = std::make_shared<PendingWork>("all_reduce", 1);
    std::atomic<bool> mine_ran{false};
    if (code == 0 && !start_napping(*own)) code = 2;
    push_deferrable(*own, mine, mine_ran);
    if (code == 0 && WorkQueue::queues_with_unwoken_items() != 1) code = 3;
    WorkQueue::start_deferred_elsewhere(nullptr);  // the parent's queue is not looked at
    if (code == 0 && !becomes_true(mine_ran)) code = 4;
    std::_Exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the child counted the parent's item; 2: its queue did not nap; "
                                       "3: its own item was not counted; 4: it never ran";
  (void)work->is_completed();
  EXPECT_TRUE(becomes_true(ran));
  parents->stop(nullptr);
}

}  // namespace
}  // namespace tdist::testing
