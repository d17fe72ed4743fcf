// When the arena is used and when not, and how its failures read: TDIST_SHM=0,
// forced transport algorithms, /dev/shm left clean, arguments that differ
// between ranks, ranks that do not arrive, a group destroyed under a pending
// operation. Ranks as threads.
#include <atomic>
#include <thread>

#include "shm_engine/host_segment_util.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

// As a blocking free function calls: on the caller's thread when the queue is idle.
const AllReduceOptions kBlocking{.async_op = false};


// all_reduce of 10 floats, 20 on the last rank.
void disagreeing_all_reduce(ProcessGroup& pg) {
  std::vector<float> v(pg.rank() == pg.size() - 1 ? 20 : 10, 1.0f);
  pg.all_reduce(v, kBlocking)->wait();
}

TEST(ArenaUse, GroupsOnOneHostMapAnArenaAndLeaveNoNameBehind) {
  for (int round = 0; round < 3; ++round) {
    with_thread_world(3, [&](ProcessGroup& pg) {
      EXPECT_TRUE(maps_an_arena());
      // Rank 0 unlinks the name once every rank has mapped the segment (the
      // others may get here before it has).
      if (pg.rank() == 0) {
        EXPECT_EQ(arena_names_of(getpid()), std::vector<std::string>{});
      }
      std::vector<int> v(5, pg.rank());
      pg.all_reduce(v)->wait();
      EXPECT_EQ(v[0], 3);
    });
  }
  EXPECT_FALSE(maps_an_arena());
  EXPECT_EQ(arena_names_of(getpid()), std::vector<std::string>{});
}

TEST(ArenaUse, ShmOffMakesNoArena) {
  ScopedEnv off("TDIST_SHM", "0");
  with_thread_world(2, [&](ProcessGroup& pg) {
    EXPECT_FALSE(maps_an_arena());
    std::vector<int> v(5, pg.rank() + 1);
    pg.all_reduce(v)->wait();
    EXPECT_EQ(v[4], 3);
  });
  for (const auto& e : errors_of(2, disagreeing_all_reduce)) {
    EXPECT_NE(e, "");
    EXPECT_FALSE(contains(e, "shared-memory")) << e;
  }
}

TEST(ArenaUse, ForcingATransportAlgorithmBypassesTheArenaForThatCollectiveOnly) {
  {
    ScopedEnv ring("TDIST_ALGO_ALL_REDUCE", "ring");
    with_thread_world(3, [&](ProcessGroup& pg) {
      std::vector<int64_t> v(100000, pg.rank() + 1);
      pg.all_reduce(v)->wait();
      EXPECT_EQ(v[99999], 6);
    });
    for (const auto& e : errors_of(2, disagreeing_all_reduce)) {
      EXPECT_NE(e, "");
      EXPECT_FALSE(contains(e, "shared-memory")) << e;
    }
    // Broadcast is not forced: it still runs in the arena. Its root leaves
    // without waiting and hears of the mismatch in its next operation.
    for (const auto& e : errors_of(2, [](ProcessGroup& pg) {
           std::vector<float> v(pg.rank() ? 20 : 10, 1.0f);
           pg.broadcast(v, 0)->wait();
           pg.barrier()->wait();
         }))
      EXPECT_TRUE(contains(e, "shared-memory broadcast #1") || contains(e, "in broadcast #1, which this rank left"))
          << e;
  }
  ScopedEnv shm("TDIST_ALGO_ALL_REDUCE", "shm");
  for (const auto& e : errors_of(2, disagreeing_all_reduce)) EXPECT_TRUE(contains(e, "shared-memory")) << e;
}

TEST(ArenaFailure, DifferentSizesFailEveryRankNamingAPeerAndLeaveBuffersAlone) {
  std::vector<std::string> errors(3);
  with_thread_world(3, [&](ProcessGroup& pg) {
    std::vector<float> v(pg.rank() == 2 ? 20 : 10, 1.0f);
    try {
      pg.all_reduce(v, kBlocking)->wait();
    } catch (const DistBackendError& e) {
      errors[pg.rank()] = e.what();
    }
    for (float x : v) EXPECT_EQ(x, 1.0f) << "rank " << pg.rank() << "'s buffer was written after the mismatch";
  });
  // Each rank finds the mismatch itself, or hears of it from the one that did first.
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(contains(errors[r], "all_reduce #1") && contains(errors[r], "rank ")) << errors[r];
    EXPECT_TRUE(contains(errors[r], "size mismatch") && contains(errors[r], "on float32 (10 elements, SUM)") &&
                contains(errors[r], "on float32 (20 elements, SUM)"))
        << errors[r];
  }
}

// The same total, split differently: reading another rank's block in one copy
// checks its size first (the signature compares only the total).
TEST(ArenaFailure, AllGatherBlocksOfDifferentSizesFailInOneCopy) {
  ScopedEnv one_copy("TDIST_SHM_SINGLE_COPY_BYTES", "1");
  auto errors = errors_of(2, [](ProcessGroup& pg) {
    // Rank 0 expects blocks of 100 and 300 bytes, rank 1 blocks of 200 and 200.
    const size_t first = pg.rank() == 0 ? 100 : 200;
    std::vector<uint8_t> a(first), b(400 - first), in(pg.rank() == 0 ? first : 400 - first, 7);
    std::vector<Tensor> outs{Tensor(a.data(), DType::UInt8, {static_cast<int64_t>(a.size())}),
                             Tensor(b.data(), DType::UInt8, {static_cast<int64_t>(b.size())})};
    pg.all_gather(outs, Tensor(in.data(), DType::UInt8, {static_cast<int64_t>(in.size())}), {.async_op = false})
        ->wait();
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(contains(errors[r], "all_gather #1") && contains(errors[r], "size mismatch") &&
                contains(errors[r], "contributes"))
        << "rank " << r << ": " << errors[r];
}

// Splits that disagree: rank 0 sends 300 bytes to rank 1, which expects 250
// (each rank tells its destinations its sizes in the segment's directory).
// Rank 0 got what it expects: it completes, or hears of rank 1's failure if it
// looks before it leaves the round.
TEST(ArenaFailure, AllToAllSplitsThatDisagreeNameTheSender) {
  auto errors = errors_of(2, [](ProcessGroup& pg) {
    const bool zero = pg.rank() == 0;
    const std::vector<int64_t> in_splits = zero ? std::vector<int64_t>{100, 300} : std::vector<int64_t>{200, 200};
    const std::vector<int64_t> out_splits = zero ? std::vector<int64_t>{100, 200} : std::vector<int64_t>{250, 200};
    std::vector<uint8_t> in(400, 7), out(zero ? 300 : 450, 0);
    pg.all_to_all_single(Tensor(out.data(), DType::UInt8, {static_cast<int64_t>(out.size())}),
                         Tensor(in.data(), DType::UInt8, {static_cast<int64_t>(in.size())}),
                         AllToAllOptions{.output_split_sizes = out_splits, .input_split_sizes = in_splits,
                                         .async_op = false})
        ->wait();
  });
  EXPECT_TRUE(contains(errors[1], "rank 0") && contains(errors[1], "sends 300 bytes to this rank, which expects 250"))
      << errors[1];
  EXPECT_TRUE(errors[0].empty() || contains(errors[0], "all_to_all")) << errors[0];
}

// Neither rank reads anything in these (a reduce to the other rank, a gather
// to the other rank), so both leave without waiting (HostSegment: Leaving) and
// find the disagreement when their next operation starts.
TEST(ArenaFailure, DifferentCollectivesAreOutOfStep) {
  auto errors = errors_of(2, [](ProcessGroup& pg) {
    std::vector<int> v(8, 1);
    if (pg.rank() == 0)
      pg.reduce(v, 1)->wait();
    else
      pg.gather({}, v, 0)->wait();
    pg.barrier()->wait();
  });
  for (const auto& e : errors) {
    EXPECT_TRUE(contains(e, "out of step") && contains(e, "which this rank left")) << e;
    EXPECT_TRUE(contains(e, "reduce") && contains(e, "gather")) << e;
  }
}

// Ranks that arrive after the others gave up on them fail that same
// operation, naming who gave up, and get no result: no rank completes a round
// another rank failed (replicas that catch the error stay alike).
TEST(ArenaFailure, RanksThatArriveAfterTheOthersGaveUpFailTheSameOperation) {
  constexpr int n = 4;
  std::atomic<int> gave_up{0};
  std::vector<std::string> errors(n);
  std::vector<std::vector<int>> results(n);
  with_thread_world(
      n,
      [&](ProcessGroup& pg) {
        const int me = pg.rank();
        std::vector<int> v(6, me + 1);
        if (me >= 2) {  // stalled until the others have given up on them
          while (gave_up.load() < 2) std::this_thread::sleep_for(milliseconds(2));
        }
        try {
          pg.all_reduce(v, kBlocking)->wait();
        } catch (const DistBackendError& e) {
          errors[me] = e.what();
        }
        results[me] = v;
        if (me < 2) gave_up.fetch_add(1);
      },
      milliseconds(1500));
  for (int r = 0; r < n; ++r) {
    const std::string& e = errors[r];
    EXPECT_TRUE(contains(e, "all_reduce #1") && contains(e, "shared-memory")) << "rank " << r << ": " << e;
    EXPECT_EQ(results[r], std::vector<int>(6, r + 1)) << "rank " << r << " got a result nobody else has";
  }
  // Rank 1 may also learn it from rank 0, which failed first.
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(contains(errors[r], "Timed out after 1500 ms: ranks [2, 3] did not arrive")) << errors[r];
  for (int r = 2; r < n; ++r) {
    EXPECT_TRUE(contains(errors[r], "failed first") && contains(errors[r], "did not arrive")) << errors[r];
  }
}

// A rank arriving around the other's deadline: whichever way it goes, both
// ranks see the same outcome, and a failed all_reduce leaves both inputs
// alone. Trials whose group could not even be set up in time are skipped;
// timing only decides which outcome a trial has, so load cannot flake it.
TEST(ArenaFailure, RanksAgreeWhetherAnOperationAtTheDeadlineHappened) {
  constexpr int kTrials = 30;
  int completed = 0, failed = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    auto store = std::make_shared<HashStore>();
    int outcome[2] = {-1, -1};  // 1: completed, 0: failed, -1: no group
    std::vector<int> got[2];
    run_in_threads(2, [&](int rank) {
      ProcessGroupOptions o;
      o.timeout = milliseconds(100);
      std::unique_ptr<ProcessGroup> pg;
      try {
        pg = std::make_unique<ProcessGroup>(store, rank, 2, o);
      } catch (const DistError&) {
        return;
      }
      std::vector<int> v(5, rank + 1);
      if (rank == 1) std::this_thread::sleep_for(milliseconds(80 + trial * 41 % 40));
      try {
        pg->all_reduce(v, kBlocking)->wait();
        outcome[rank] = 1;
      } catch (const DistBackendError&) {
        outcome[rank] = 0;
      }
      got[rank] = v;
    });
    if (outcome[0] < 0 || outcome[1] < 0) continue;
    EXPECT_EQ(outcome[0], outcome[1]) << "trial " << trial << ": rank 0 " << (outcome[0] ? "completed" : "failed")
                                      << ", rank 1 " << (outcome[1] ? "completed" : "failed");
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(got[r], std::vector<int>(5, outcome[r] ? 3 : r + 1)) << "trial " << trial << ", rank " << r;
    (outcome[0] ? completed : failed)++;
  }
  std::printf("%d trials completed on both ranks, %d failed on both\n", completed, failed);
}

TEST(ArenaFailure, DestroyingAGroupFailsItsPendingArenaWorkAtOnce) {
  std::shared_ptr<Work> pending;
  std::atomic<bool> checked{false};
  std::vector<int> v(4, 1);
  with_thread_world(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) {  // never joins; leaves only after rank 0 is done
          while (!checked.load()) std::this_thread::sleep_for(milliseconds(2));
          return;
        }
        pending = pg.all_reduce(v);
        std::this_thread::sleep_for(milliseconds(50));  // let it start waiting (not required)
        pg.shutdown();  // the test would hit ctest's limit if this did not end the wait
        try {
          pending->wait();
          ADD_FAILURE() << "the pending all_reduce succeeded";
        } catch (const DistError& e) {
          EXPECT_TRUE(contains(e.what(), "destroyed")) << e.what();
        }
        checked.store(true);
      },
      std::chrono::minutes(10));
}

// --- ranks that leave a round early (HostSegment: Leaving) -----------------------------

// A loop of word-sized and larger broadcasts from changing roots, and reduces
// to changing roots, mixed with all_reduce: the leaving ranks run ahead by one
// operation, and every value must still arrive in order.
TEST(ArenaLeave, LoopsOfBroadcastsAndReducesKeepTheirOrder) {
  with_thread_world(3, [](ProcessGroup& pg) {
    std::vector<float> big(3000);  // several 4 KiB slots when the test shrinks them; one otherwise
    for (int k = 0; k < 300; ++k) {
      const int root = (k / 7) % 3;
      int64_t word = pg.rank() == root ? k * 10 + root : -1;
      pg.broadcast(Tensor(&word, 1), root)->wait();
      ASSERT_EQ(word, k * 10 + root) << "broadcast " << k;
      std::fill(big.begin(), big.end(), pg.rank() == root ? static_cast<float>(k) : -1.0f);
      pg.broadcast(big, root)->wait();
      ASSERT_EQ(big.front(), k) << "broadcast " << k;
      ASSERT_EQ(big.back(), k) << "broadcast " << k;
      int32_t mine = k + pg.rank();
      pg.reduce(Tensor(&mine, 1), root)->wait();
      if (pg.rank() == root) ASSERT_EQ(mine, 3 * k + 3) << "reduce " << k;
      if (k % 5 == 0) {
        int32_t one = 1;
        pg.all_reduce(Tensor(&one, 1))->wait();
        ASSERT_EQ(one, 3);
      }
    }
  });
}

// A rank that wrote its part and left may destroy its group (closing its
// connections) while the others still wait for a slow rank: the round must
// complete for them, with its data. Rank 2's sleep only makes that overlap
// likely; nothing asserted depends on how long anything takes (a rank 2 that
// came early would pass the same checks), so a loaded machine cannot flake it.
TEST(ArenaLeave, ARankThatLeftAndIsGoneDoesNotFailTheRound) {
  with_thread_world(3, [](ProcessGroup& pg) {
    std::vector<int32_t> v(5, pg.rank() == 0 ? 42 : 0);
    if (pg.rank() == 2) std::this_thread::sleep_for(milliseconds(200));
    pg.broadcast(v, 0)->wait();  // rank 0 leaves, then its group is destroyed
    EXPECT_EQ(v, std::vector<int32_t>(5, 42)) << "rank " << pg.rank();
  });
  with_thread_world(3, [](ProcessGroup& pg) {
    int64_t x = pg.rank() + 1;
    if (pg.rank() == 2) std::this_thread::sleep_for(milliseconds(200));
    pg.reduce(Tensor(&x, 1), 1)->wait();  // rank 0 leaves; rank 1 waits for rank 2
    if (pg.rank() == 1) EXPECT_EQ(x, 6);
  });
  with_thread_world(3, [](ProcessGroup& pg) {
    std::vector<int16_t> mine(3, static_cast<int16_t>(pg.rank() + 7));
    std::vector<std::vector<int16_t>> all(3, std::vector<int16_t>(3, 0));
    std::vector<Tensor> outputs;
    if (pg.rank() == 1)
      for (auto& o : all) outputs.emplace_back(o);
    if (pg.rank() == 2) std::this_thread::sleep_for(milliseconds(200));
    pg.gather(outputs, mine, 1)->wait();  // rank 0 leaves
    if (pg.rank() == 1)
      for (int q = 0; q < 3; ++q) EXPECT_EQ(all[q], std::vector<int16_t>(3, static_cast<int16_t>(q + 7)));
  });
}

}  // namespace
}  // namespace tdist::testing
