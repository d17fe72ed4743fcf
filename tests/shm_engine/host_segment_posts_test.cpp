// Post rounds of the arena (HostSegment: Posts): broadcasts, reduces and
// gathers of at most kPostBytes per rank (a word in the post entry, more in
// the entry's payload), in which a broadcast's non-roots wait
// for the root alone and a broadcast's root and a reduce's or gather's
// contributors wait for nobody. A root runs calls ahead of a stalled rank;
// long loops wrap every rank's entries many times; every disagreement is
// still found; a missing root is named, and the ranks agree on a post round
// at its deadline. Ranks as threads.
#include <atomic>
#include <thread>

#include "shm_engine/host_segment_util.h"
#include "shm_engine/layout.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

// Waits up to a minute for `flag`: only a hang reaches the limit.
bool becomes_true(const std::atomic<bool>& flag) {
  for (int i = 0; i < 60000 && !flag.load(); ++i) std::this_thread::sleep_for(milliseconds(1));
  return flag.load();
}

// A root completes broadcasts of a word, then of a whole payload, while a
// non-root has not started any: the root waits for nobody until it would
// reuse a post entry (kPostDepth rounds). With the root one call ahead at
// most (as before posts, and for payloads before they existed), rank 1 would
// wait for the flag forever and the test would fail at its minute.
TEST(ArenaPosts, ARootRunsBroadcastsAheadOfARankThatHasNotStarted) {
  constexpr int kAhead = static_cast<int>(shm_engine::kPostDepth) / 2;
  for (size_t count : {size_t{1}, shm_engine::kPostBytes / sizeof(int64_t)}) {
    std::atomic<bool> root_done{false};
    with_thread_world(3, [&](ProcessGroup& pg) {
      if (pg.rank() == 1) {
        ASSERT_TRUE(becomes_true(root_done)) << "the root did not get ahead, " << count << " int64";
      }
      for (int k = 0; k < kAhead; ++k) {
        std::vector<int64_t> data(count, -1);
        if (pg.rank() == 0)
          for (size_t i = 0; i < count; ++i) data[i] = 1000 * k + static_cast<int64_t>(i);
        pg.broadcast(data, 0)->wait();
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(data[i], 1000 * k + static_cast<int64_t>(i)) << "rank " << pg.rank() << ", broadcast " << k;
      }
      if (pg.rank() == 0) root_done.store(true);
      int32_t one = 1;
      pg.all_reduce(Tensor(&one, 1))->wait();  // everyone meets again
      EXPECT_EQ(one, 3);
    });
  }
}

// The same for a reduce's contributors, which wait for nobody either (a
// word, then a whole payload of int32).
TEST(ArenaPosts, ContributorsRunReducesAheadOfTheRoot) {
  constexpr int kAhead = static_cast<int>(shm_engine::kPostDepth) / 2;
  for (size_t count : {size_t{1}, shm_engine::kPostBytes / sizeof(int32_t)}) {
    std::atomic<int> contributors_done{0};
    std::atomic<bool> all_done{false};
    with_thread_world(3, [&](ProcessGroup& pg) {
      if (pg.rank() == 2) {
        ASSERT_TRUE(becomes_true(all_done)) << "the contributors did not get ahead, " << count << " int32";
      }
      for (int k = 0; k < kAhead; ++k) {
        std::vector<int32_t> mine(count);
        for (size_t i = 0; i < count; ++i) mine[i] = k * 10 + pg.rank() + static_cast<int32_t>(i);
        pg.reduce(mine, 2)->wait();
        for (size_t i = 0; i < count && pg.rank() == 2; ++i)
          ASSERT_EQ(mine[i], 3 * k * 10 + 3 + 3 * static_cast<int32_t>(i)) << "reduce " << k << ", element " << i;
      }
      if (pg.rank() != 2 && contributors_done.fetch_add(1) + 1 == 2) all_done.store(true);
    });
  }
}

// Thousands of word-sized broadcasts, reduces and gathers from rotating
// roots, with a rank that sleeps now and then (so that others run ahead and
// the entries wrap around at every distance), mixed with ones of 12 to 2088
// bytes (payloads, and past kPostBytes the slots), slot-sized ones and
// all_reduces that make every rank meet. Every value is checked.
TEST(ArenaPosts, LongMixedLoopsWrapTheEntriesAndKeepEveryValue) {
  for (int n : {2, 3, 5}) {
    with_thread_world(n, [n](ProcessGroup& pg) {
      const int me = pg.rank();
      std::vector<float> big(300);
      for (int k = 0; k < 2000; ++k) {
        const int root = (k / 3) % n;
        if (me == (k / 50) % n && k % 50 == 7) std::this_thread::sleep_for(milliseconds(1));
        int64_t word = me == root ? k * 100 + root : -1;
        pg.broadcast(Tensor(&word, 1), root)->wait();
        ASSERT_EQ(word, k * 100 + root) << "n " << n << ", rank " << me << ", broadcast " << k;
        int16_t part = static_cast<int16_t>(k % 100 + me);
        pg.reduce(Tensor(&part, 1), (root + 1) % n)->wait();
        if (me == (root + 1) % n) {
          ASSERT_EQ(part, static_cast<int16_t>(n * (k % 100) + n * (n - 1) / 2)) << "reduce " << k;
        }
        if (k % 7 == 0) {
          float mine[2] = {static_cast<float>(k), static_cast<float>(me)};
          std::vector<std::vector<float>> all(n, std::vector<float>(2, -1.0f));
          std::vector<Tensor> outs;
          if (me == root)
            for (auto& o : all) outs.emplace_back(o);
          pg.gather(outs, Tensor(mine, 2), root)->wait();
          for (int q = 0; q < n && me == root; ++q) {
            ASSERT_EQ(all[q], (std::vector<float>{static_cast<float>(k), static_cast<float>(q)})) << "gather " << k;
          }
        }
        if (k % 3 == 1) {
          const size_t count = static_cast<size_t>(k % 520) + 3;  // 12 to 2088 bytes
          static_assert(520 * sizeof(int32_t) > shm_engine::kPostBytes);
          std::vector<int32_t> mid(count, -1);
          for (size_t i = 0; i < count && me == root; ++i) mid[i] = k + static_cast<int32_t>(i);
          pg.broadcast(mid, root)->wait();
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(mid[i], k + static_cast<int32_t>(i)) << "broadcast " << k;
          for (size_t i = 0; i < count; ++i) mid[i] = me * 1000 + static_cast<int32_t>(i);
          std::vector<std::vector<int32_t>> all(n, std::vector<int32_t>(count, -1));
          std::vector<Tensor> outs;
          if (me == root)
            for (auto& o : all) outs.emplace_back(o);
          pg.gather(outs, mid, root)->wait();
          for (int q = 0; q < n && me == root; ++q)
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(all[q][i], q * 1000 + static_cast<int32_t>(i)) << "gather " << k;
          pg.reduce(mid, (root + 1) % n)->wait();
          for (size_t i = 0; i < count && me == (root + 1) % n; ++i)
            ASSERT_EQ(mid[i], 1000 * n * (n - 1) / 2 + n * static_cast<int32_t>(i)) << "reduce " << k;
        }
        if (k % 13 == 0) {
          std::fill(big.begin(), big.end(), me == root ? static_cast<float>(k) : -1.0f);
          pg.broadcast(big, root)->wait();
          ASSERT_EQ(big.back(), static_cast<float>(k)) << "broadcast of 300 floats " << k;
        }
        if (k % 31 == 0) {
          int32_t one = 1;
          pg.all_reduce(Tensor(&one, 1))->wait();
          ASSERT_EQ(one, n);
        }
      }
    });
  }
}

// A non-root that broadcasts another dtype finds out in that call; the
// root, which waits for nobody, in its next one (from its own look at the
// round it left, or from the non-root's verdict).
TEST(ArenaPosts, ANonRootOfAnotherDtypeFailsAtOnceAndTheRootNextCall) {
  auto errors = errors_of(2, [](ProcessGroup& pg) {
    int64_t wide = 7;
    int32_t narrow = 7;
    if (pg.rank() == 0)
      pg.broadcast(Tensor(&wide, 1), 0)->wait();
    else
      EXPECT_THROW(pg.broadcast(Tensor(&narrow, 1), 0)->wait(), DistBackendError);
    pg.barrier()->wait();
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(contains(errors[r], "broadcast #1") && contains(errors[r], "different arguments") &&
                contains(errors[r], "int32") && contains(errors[r], "int64"))
        << "rank " << r << ": " << errors[r];
  EXPECT_TRUE(contains(errors[0], "barrier #2")) << "the root hears of it in its next call: " << errors[0];
}

// Rank 2 calls all_reduce where ranks 0 and 1 broadcast a word from rank 0:
// rank 2 finds them out of step at once. Rank 1 waits for the root alone: it
// completes the broadcast with the root's word and fails its next call, or,
// when rank 2's verdict came first, fails the broadcast; never does it take
// anything but the root's word. The root fails its next call (HostSegment:
// Posts). Which way rank 1 goes depends on timing; both are checked.
TEST(ArenaPosts, ARankOutOfStepFailsAtOnceAndTheOthersByTheirNextCall) {
  std::vector<int64_t> got(3, -1);
  auto errors = errors_of(3, [&](ProcessGroup& pg) {
    int64_t word = pg.rank() == 0 ? 99 : -1;
    if (pg.rank() == 2) {
      pg.all_reduce(Tensor(&word, 1))->wait();
    } else {
      pg.broadcast(Tensor(&word, 1), 0)->wait();
      got[pg.rank()] = word;
    }
    pg.barrier()->wait();
  });
  EXPECT_TRUE(contains(errors[2], "out of step") && contains(errors[2], "broadcast")) << errors[2];
  EXPECT_TRUE(got[1] == 99 || got[1] == -1) << "rank 1 took " << got[1];
  EXPECT_TRUE(contains(errors[1], got[1] == 99 ? "barrier #2" : "broadcast #1")) << errors[1];
  EXPECT_TRUE(contains(errors[0], "barrier #2")) << errors[0];
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(contains(errors[r], "out of step") && contains(errors[r], "all_reduce #1"))
        << "rank " << r << ": " << errors[r];
}

// A root that never broadcasts: its non-roots time out naming it alone, not
// each other (they wait for the root only).
TEST(ArenaPosts, AMissingRootIsNamedAlone) {
  std::atomic<int> failed{0};
  std::vector<std::string> errors(3);
  with_thread_world(
      3,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 0) {  // stays away until both others gave up
          while (failed.load() < 2) std::this_thread::sleep_for(milliseconds(2));
          return;
        }
        int64_t word = 0;
        try {
          pg.broadcast(Tensor(&word, 1), 0)->wait();
        } catch (const DistBackendError& e) {
          errors[pg.rank()] = e.what();
        }
        failed.fetch_add(1);
      },
      milliseconds(1000));
  for (int r = 1; r < 3; ++r) {
    EXPECT_TRUE(contains(errors[r], "broadcast #1") && contains(errors[r], "rank 0 did not arrive")) << errors[r];
    EXPECT_FALSE(contains(errors[r], "ranks [")) << errors[r];
  }
}

// The root arriving around the non-roots' deadline: whichever way it goes,
// both non-roots see the same outcome (the claim of one that gives up is
// withdrawn if the root arrived, and otherwise fails the other too).
// Timing only decides which outcome a trial has, so load cannot flake it.
TEST(ArenaPosts, NonRootsAgreeWhetherABroadcastAtTheDeadlineHappened) {
  constexpr int kTrials = 20;
  int completed = 0, failed = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    auto store = std::make_shared<HashStore>();
    int outcome[3] = {-1, -1, -1};  // 1: completed, 0: failed, -1: no group
    int64_t got[3] = {-1, -1, -1};
    run_in_threads(3, [&](int rank) {
      ProcessGroupOptions o;
      o.timeout = milliseconds(100);
      std::unique_ptr<ProcessGroup> pg;
      try {
        pg = std::make_unique<ProcessGroup>(store, rank, 3, o);
      } catch (const DistError&) {
        return;
      }
      int64_t word = rank == 0 ? 5 : -1;
      if (rank == 0) std::this_thread::sleep_for(milliseconds(80 + trial * 41 % 40));
      try {
        pg->broadcast(Tensor(&word, 1), 0)->wait();
        outcome[rank] = 1;
      } catch (const DistBackendError&) {
        outcome[rank] = 0;
      }
      got[rank] = word;
    });
    if (outcome[1] < 0 || outcome[2] < 0) continue;
    EXPECT_EQ(outcome[1], outcome[2]) << "trial " << trial;
    for (int r = 1; r < 3; ++r) EXPECT_EQ(got[r], outcome[r] ? 5 : -1) << "trial " << trial << ", rank " << r;
    (outcome[1] ? completed : failed)++;
  }
  std::printf("%d trials completed on both non-roots, %d failed on both\n", completed, failed);
}

}  // namespace
}  // namespace tdist::testing
