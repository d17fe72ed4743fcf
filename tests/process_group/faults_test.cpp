// Forked processes: monitored_barrier with ranks that never arrive, and ranks
// that disagree about a collective (different roots, sizes or operations).
// Every rank must get a DistError naming the operation, its sequence number
// and a peer, within the short group timeout: never a hang.
#include <atomic>
#include <thread>

#include "process_group/process_util.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

void wait_flag(std::atomic<int>& flag) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (flag.load() == 0 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(milliseconds(5));
}

TEST(CollMonitoredBarrier, EveryRankArrives) {
  run_world(4, [](int) {
    for (int k = 0; k < 3; ++k) tdist::monitored_barrier(nullptr, milliseconds(20000), k == 1);
    tdist::monitored_barrier();  // the group's timeout
    Group g = tdist::new_group({1, 3});
    tdist::monitored_barrier(g, milliseconds(20000), true);
    tdist::barrier();
  });
}

TEST(CollMonitoredBarrier, RankZeroNamesTheRankThatNeverArrives) {
  Shared<std::atomic<int>> done;
  run_world(4, [&](int me) {
    if (me == 2) {  // never arrives; stays alive until rank 0 has reported it
      wait_flag(*done);
      return;
    }
    try {
      tdist::monitored_barrier(nullptr, milliseconds(1000));
      if (me == 0) done->store(1);
      require(false, "monitored_barrier passed without rank 2");
    } catch (const DistError& e) {
      std::string m = e.what();
      std::fprintf(stderr, "[rank %d] got, as expected: %s\n", me, m.c_str());
      if (me == 0) {
        done->store(1);
        require(dynamic_cast<const DistBackendError*>(&e) != nullptr, "not a DistBackendError: " + m);
        require(has(m, "rank 2") && has(m, "monitored_barrier"), "rank 0's error does not name rank 2: " + m);
        require(!has(m, "rank 1 ") && !has(m, "rank 3 "), "rank 0's error names a rank that arrived: " + m);
      } else {
        require(has(m, "monitored_barrier"), "error does not name the operation: " + m);
      }
    }
  });
}

TEST(CollMonitoredBarrier, WaitAllRanksNamesEveryMissingRank) {
  Shared<std::atomic<int>> done;
  run_world(4, [&](int me) {
    if (me == 1 || me == 3) {
      wait_flag(*done);
      return;
    }
    try {
      tdist::monitored_barrier(nullptr, milliseconds(1000), /*wait_all_ranks=*/true);
      if (me == 0) done->store(1);
      require(false, "monitored_barrier passed without ranks 1 and 3");
    } catch (const DistError& e) {
      std::string m = e.what();
      std::fprintf(stderr, "[rank %d] got, as expected: %s\n", me, m.c_str());
      if (me == 0) {
        done->store(1);
        require(dynamic_cast<const DistBackendError*>(&e) != nullptr, "not a DistBackendError: " + m);
        require(has(m, "[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 1000 ms"),
                "rank 0's error does not list ranks 1 and 3 in torch's words: " + m);
      }
    }
  });
}

// timeout 0 is no time at all, as torch's timedelta(0): rank 0 fails at once
// while rank 1 has not called (it waits until rank 0 has failed).
TEST(CollMonitoredBarrier, AZeroTimeoutFailsAtOnce) {
  Shared<std::atomic<int>> done;
  run_world(2, [&](int me) {
    if (me == 1) {
      wait_flag(*done);
      return;
    }
    try {
      tdist::monitored_barrier(nullptr, milliseconds(0));
      done->store(1);
      require(false, "monitored_barrier with timeout 0 passed without rank 1");
    } catch (const DistError& e) {
      done->store(1);
      // Gloo's words when rank 0 had no time at all, and who had not arrived.
      require(has(e.what(), "Rank 0 timed out in monitoredBarrier after 0 ms, before Rank 1 had passed it"),
              std::string("wrong error: ") + e.what());
    }
  });
}

// In a subgroup the error gives the missing rank's global rank and address too.
TEST(CollMonitoredBarrier, MissingRankOfASubgroupIsNamedWithItsGlobalRank) {
  Shared<std::atomic<int>> done;
  run_world(4, [&](int me) {
    Group g = tdist::new_group({1, 2, 3});
    if (me == 3) {
      wait_flag(*done);
      return;
    }
    try {
      tdist::monitored_barrier(g, milliseconds(1000));  // a no-op on rank 0, not a member
      require(me == 0, "monitored_barrier passed without rank 3");
    } catch (const DistError& e) {
      std::string m = e.what();
      std::fprintf(stderr, "[rank %d] got, as expected: %s\n", me, m.c_str());
      if (me == 1) {
        done->store(1);
        require(has(m, "monitored_barrier") && has(m, "Rank 3 failed to pass monitoredBarrier in 1000 ms") &&
                    has(m, "the first one missing") && has(m, "group rank 2"),
                "group rank 0's error does not name global rank 3 (group rank 2): " + m);
      }
    }
    if (me == 1) done->store(1);
    if (me == 0) wait_flag(*done);  // rank 0 serves the store the others still use
  });
}

// --- ranks that disagree ---------------------------------------------------------

// In a group of every rank with a 2 s timeout, `step` makes the ranks disagree.
// A rank whose own part of the step could complete (a broadcast root has
// nobody to wait for) learns of the failure from the next operations on the
// group: up to two follow-up barriers (the first can complete too when the
// peer fails only after sending its part). Every rank must see a DistError
// naming an operation, its number and a peer; none may hang. The group has
// connections of its own (TDIST_SHARE_CONNECTIONS=0), so the default group
// must still work afterwards.
void expect_error_on_every_rank(int n, const std::function<void(int, const Group&)>& step) {
  ScopedEnv own("TDIST_SHARE_CONNECTIONS", "0");
  run_world(n, [&](int me) {
    Group g = tdist::new_group({}, milliseconds(2000));
    std::string first;
    try {
      step(me, g);
    } catch (const DistError& e) {
      first = e.what();
    }
    for (int k = 0; k < 2 && first.empty(); ++k) {
      try {
        tdist::barrier(g);
      } catch (const DistError& e) {
        first = e.what();
      }
    }
    std::fprintf(stderr, "[rank %d] got: %s\n", me, first.c_str());
    require(!first.empty(), "rank " + std::to_string(me) + " got no error from the disagreeing collective");
    require(has(first, " #") && has(first, "rank "), "the error does not name an operation number and a peer: " + first);
    // The default group is unaffected.
    std::vector<int32_t> v(3, 1);
    tdist::all_reduce(v);
    require(v[0] == n, "default group after the failure");
  });
}

TEST(CollDisagreement, BroadcastWithDifferentRoots) {
  expect_error_on_every_rank(3, [](int me, const Group& g) {
    std::vector<float> v(100, static_cast<float>(me));
    tdist::broadcast(v, me == 2 ? 1 : 0, g);  // rank 2 waits for rank 1, which thinks it is a leaf
  });
}

TEST(CollDisagreement, BroadcastWhereEachRankThinksTheOtherIsRoot) {
  expect_error_on_every_rank(2, [](int me, const Group& g) {
    std::vector<int64_t> v(10, me);
    tdist::broadcast(v, 1 - me, g);
  });
}

TEST(CollDisagreement, BroadcastWhereEveryRankIsTheRoot) {
  // Both ranks send and nobody receives: each rank's own part completes, and
  // the stale message shows up when the next collective waits.
  expect_error_on_every_rank(2, [](int me, const Group& g) {
    std::vector<int64_t> v(10, me);
    tdist::broadcast(v, me, g);
  });
}

// Over TCP, when every rank thinks it is the broadcast's root, each rank's
// part completes (it only sends); the next collective must then fail on every
// rank, never succeed on some (replicas that catch the error stay alike),
// whichever order the stray messages and the next ones arrive in.
TEST(CollDisagreement, AfterABroadcastEveryRankRootedTheNextCollectiveFailsEverywhereOverTcp) {
  ScopedEnv tcp("TDIST_SHM", "0");
  ScopedEnv own("TDIST_SHARE_CONNECTIONS", "0");  // each try's group fails alone
  for (int n : {2, 3}) {
    run_world(n, [n](int me) {
      for (int k = 0; k < 8; ++k) {
        Group g = tdist::new_group({}, milliseconds(5000));
        std::vector<int64_t> v(k % 2 ? 3 : 5000, me);  // small, and past a rendezvous head
        try {
          tdist::broadcast(v, me, g);
        } catch (const DistError&) {
        }
        std::vector<int32_t> one(3, 1);
        try {
          tdist::all_reduce(one, ReduceOp::SUM, g);
        } catch (const DistError& e) {
          // Usually it names the broadcast; a rank whose send met a peer
          // that had already closed names that peer instead.
          require(has(e.what(), "all_reduce #2") && has(e.what(), "rank "),
                  "rank " + std::to_string(me) + ": the error does not name the operation and a peer: " + e.what());
          continue;
        }
        require(false, "rank " + std::to_string(me) + " of " + std::to_string(n) + ", try " + std::to_string(k) +
                           ": the all_reduce after a disagreeing broadcast succeeded");
      }
    });
  }
}

TEST(CollDisagreement, AllGatherWithMismatchedSizes) {
  expect_error_on_every_rank(3, [](int me, const Group& g) {
    // Rank 1 contributes 5 elements; the others expect 4 from everyone.
    std::vector<std::vector<int32_t>> out(3, std::vector<int32_t>(4, -1));
    if (me == 1) out[1].resize(5);
    std::vector<int32_t> in(me == 1 ? 5 : 4, me);
    tdist::all_gather(std::vector<Tensor>(out.begin(), out.end()), in, g);
  });
}

TEST(CollDisagreement, AllReduceOnOneRankBroadcastOnTheOther) {
  expect_error_on_every_rank(2, [](int me, const Group& g) {
    std::vector<float> v(64, 1.0f);
    if (me == 0)
      tdist::all_reduce(v, ReduceOp::SUM, g);
    else
      tdist::broadcast(v, 0, g);
  });
}

TEST(CollDisagreement, AllReduceOnOneRankBroadcastRootOnTheOther) {
  expect_error_on_every_rank(2, [](int me, const Group& g) {
    std::vector<float> v(64, 1.0f);
    if (me == 0)
      tdist::all_reduce(v, ReduceOp::SUM, g);
    else
      tdist::broadcast(v, 1, g);  // rank 1 sends and is done; rank 0 must still fail
  });
}

TEST(CollDisagreement, AllToAllSingleWithSplitsThatDoNotMatch) {
  expect_error_on_every_rank(2, [](int me, const Group& g) {
    // Rank 0 expects 2 rows from rank 1, rank 1 sends 3.
    std::vector<double> in(me == 0 ? 4 : 5, me), out(4, -1);
    std::vector<int64_t> in_splits = me == 0 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{3, 2};
    std::vector<int64_t> out_splits{2, 2};
    tdist::all_to_all_single(out, in, out_splits, in_splits, g);
  });
}

TEST(CollDisagreement, GatherWhereEveryRankIsTheRoot) {
  expect_error_on_every_rank(2, [](int me, const Group& g) {
    std::vector<std::vector<int16_t>> out(2, std::vector<int16_t>(8, -1));
    std::vector<int16_t> in(8, static_cast<int16_t>(me));
    tdist::gather(in, std::vector<Tensor>(out.begin(), out.end()), me, g);
  });
}

}  // namespace
}  // namespace tdist::testing

namespace tdist::testing {
namespace {

// Over TCP, ranks that call a collective with another dtype of the same size
// or another reduce op fail at that collective, every one of them, with an
// error naming the difference (the call's signature travels in its tags).
void expect_argument_error_on_every_rank(const std::function<void(int, const Group&)>& step, const std::string& what) {
  ScopedEnv tcp("TDIST_SHM", "0");
  run_world(2, [&](int me) {
    Group g = tdist::new_group({}, milliseconds(5000));
    try {
      step(me, g);
    } catch (const DistError& e) {
      require(has(e.what(), "different arguments") && has(e.what(), what),
              "rank " + std::to_string(me) + ": the error does not name the difference: " + e.what());
      return;
    }
    require(false, "rank " + std::to_string(me) + " completed a collective the other rank called differently");
  });
}

TEST(CollDisagreement, AllReduceOfFloat32AgainstInt32OverTcp) {
  expect_argument_error_on_every_rank(
      [](int me, const Group& g) {
        if (me == 0) {
          std::vector<float> v(1024, 1.0f);
          tdist::all_reduce(v, ReduceOp::SUM, g);
        } else {
          std::vector<int32_t> v(1024, 1);
          tdist::all_reduce(v, ReduceOp::SUM, g);
        }
      },
      "dtype");
}

TEST(CollDisagreement, AllReduceSumAgainstMaxOverTcp) {
  expect_argument_error_on_every_rank(
      [](int me, const Group& g) {
        std::vector<float> v(1024, 1.0f);
        tdist::all_reduce(v, me == 0 ? ReduceOp::SUM : ReduceOp::MAX, g);
      },
      "reduce op");
}

}  // namespace
}  // namespace tdist::testing
