// When the arena is used and when not, and how its failures read: TDIST_SHM=0,
// forced transport algorithms, /dev/shm left clean, arguments that differ
// between ranks, ranks that do not arrive, a group destroyed under a pending
// operation. Ranks as threads.
#include <atomic>
#include <thread>

#include "arena/arena_util.h"
#include "backends/call_hint.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

// The error of a call on every rank ("" where it succeeded).
std::vector<std::string> errors_of(int n, const std::function<void(ProcessGroup&)>& call,
                                   milliseconds timeout = std::chrono::seconds(20)) {
  std::vector<std::string> errors(n);
  with_thread_world(
      n,
      [&](ProcessGroup& pg) {
        try {
          BlockingCallHint hint(true);
          call(pg);
        } catch (const DistError& e) {
          errors[pg.rank()] = e.what();
        }
      },
      timeout);
  return errors;
}

// all_reduce of 10 floats, 20 on the last rank.
void disagreeing_all_reduce(ProcessGroup& pg) {
  std::vector<float> v(pg.rank() == pg.size() - 1 ? 20 : 10, 1.0f);
  pg.all_reduce(v)->wait();
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
    // Broadcast is not forced: it still runs in the arena.
    for (const auto& e : errors_of(2, [](ProcessGroup& pg) {
           std::vector<float> v(pg.rank() ? 20 : 10, 1.0f);
           pg.broadcast(v, 0)->wait();
         }))
      EXPECT_TRUE(contains(e, "shared-memory broadcast #1")) << e;
  }
  ScopedEnv shm("TDIST_ALGO_ALL_REDUCE", "shm");
  for (const auto& e : errors_of(2, disagreeing_all_reduce)) EXPECT_TRUE(contains(e, "shared-memory")) << e;
}

TEST(ArenaFailure, DifferentSizesFailEveryRankNamingAPeerAndLeaveBuffersAlone) {
  std::vector<std::string> errors(3);
  with_thread_world(3, [&](ProcessGroup& pg) {
    std::vector<float> v(pg.rank() == 2 ? 20 : 10, 1.0f);
    try {
      BlockingCallHint hint(true);
      pg.all_reduce(v)->wait();
    } catch (const DistBackendError& e) {
      errors[pg.rank()] = e.what();
    }
    for (float x : v) EXPECT_EQ(x, 1.0f) << "rank " << pg.rank() << "'s buffer was written after the mismatch";
  });
  // Each rank finds the mismatch itself, or hears of it from the one that did first.
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(contains(errors[r], "all_reduce #1") && contains(errors[r], "rank ")) << errors[r];
    EXPECT_TRUE(contains(errors[r], "size mismatch") && contains(errors[r], "all_reduce (float32, SUM, 40 bytes)") &&
                contains(errors[r], "all_reduce (float32, SUM, 80 bytes)"))
        << errors[r];
  }
}

TEST(ArenaFailure, DifferentCollectivesAreOutOfStep) {
  auto errors = errors_of(2, [](ProcessGroup& pg) {
    std::vector<int> v(8, 1);
    if (pg.rank() == 0)
      pg.reduce(v, 1)->wait();
    else
      pg.gather({}, v, 0)->wait();
  });
  for (const auto& e : errors) EXPECT_TRUE(contains(e, "out of step")) << e;
}

TEST(ArenaFailure, RanksThatDoNotArriveAreNamedAndTheGroupFailsAfterwards) {
  constexpr int n = 4;
  std::atomic<int> gave_up{0};
  std::vector<std::string> errors(n), later(n);
  with_thread_world(
      n,
      [&](ProcessGroup& pg) {
        const int me = pg.rank();
        std::vector<int> v(6, 1);
        BlockingCallHint hint(true);
        if (me >= 2) {  // stalled until the others have given up on them
          while (gave_up.load() < 2) std::this_thread::sleep_for(milliseconds(2));
        }
        try {
          pg.all_reduce(v)->wait();
          // The stalled ranks find everyone arrived at this round (the
          // others gave up after arriving); the next one must fail.
          pg.all_reduce(v)->wait();
        } catch (const DistBackendError& e) {
          (me < 2 ? errors : later)[me] = e.what();
        }
        if (me < 2) gave_up.fetch_add(1);
      },
      milliseconds(1500));
  for (int r = 0; r < 2; ++r) {
    const std::string& e = errors[r];
    EXPECT_TRUE(contains(e, "all_reduce #1") && contains(e, "shared-memory")) << e;
    // Rank 1 may also learn it from rank 0, which failed first.
    EXPECT_TRUE(contains(e, "timed out after 1500 ms: ranks [2, 3] did not arrive")) << e;
  }
  for (int r = 2; r < n; ++r) EXPECT_TRUE(contains(later[r], "failed first")) << later[r];
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

}  // namespace
}  // namespace tdist::testing
