// Faults across real processes: a rank killed mid-collective, a rank stalled
// past the timeout, ranks that disagree. Survivors must get a typed error that
// names the operation, its sequence number and the peer, within the timeout;
// later calls must fail fast with the original cause.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <regex>
#include <thread>

#include "backends/process_world.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

// Fails the child (exit 1, message on stderr) when `cond` is false.
void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

TEST(Failure, KilledRankMidCollectiveIsNamedBySurvivors) {
  Shared<PortBoard> board;
  auto results = run_in_processes(3, [&](int rank) {
    init_process_world(*board, rank, 3, milliseconds(20000));
    std::vector<float> v(1000, 1.0f);
    all_reduce(v);  // #1 succeeds everywhere
    require(v[0] == 3.0f, "first all_reduce gave " + std::to_string(v[0]));
    if (rank == 2) raise(SIGKILL);
    try {
      all_reduce(v);  // #2: rank 2 is gone
      require(false, "all_reduce #2 succeeded without rank 2");
    } catch (const DistError& e) {
      std::string m = e.what();
      std::fprintf(stderr, "[rank %d] got, as expected: %s\n", rank, m.c_str());
      require(dynamic_cast<const DistNetworkError*>(&e) || dynamic_cast<const DistBackendError*>(&e),
              "untyped error: " + m);
      require(contains(m, "all_reduce #2"), "error does not name the operation and its number: " + m);
      require(contains(m, "rank 2"), "error does not name the lost rank 2: " + m);
    }
    // Later calls fail fast with the original cause.
    try {
      all_reduce(v);
      require(false, "all_reduce #3 succeeded on a failed group");
    } catch (const DistError& e) {
      require(contains(e.what(), "failed earlier") && contains(e.what(), "rank 2"),
              std::string("later call does not carry the original cause: ") + e.what());
    }
  });
  EXPECT_TRUE(results[0].ok()) << results[0].describe();
  EXPECT_TRUE(results[1].ok()) << results[1].describe();
  EXPECT_EQ(results[2].signal, SIGKILL) << results[2].describe();
}

// Holds a rank (stalled, or with its sockets closed) until the survivors have
// seen their error: a flag in shared memory, not a sleep of a guessed length.
struct SurvivorCount {
  std::atomic<int> done{0};
  void wait_for(int survivors) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (done.load() < survivors && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(milliseconds(5));
  }
};

TEST(Failure, StalledRankBecomesATimeoutNamingIt) {
  Shared<PortBoard> board;
  Shared<SurvivorCount> survivors;
  auto results = run_in_processes(2, [&](int rank) {
    // A roomy timeout for setting up, a short one for the group under test.
    init_process_world(*board, rank, 2, milliseconds(30000));
    Group g = new_group({0, 1}, milliseconds(1500));
    std::vector<int64_t> v(10, 1);
    if (rank == 1) {
      survivors->wait_for(1);  // stalled until rank 0 has timed out
      return;
    }
    struct Done {
      SurvivorCount& c;
      ~Done() { c.done.fetch_add(1); }
    } done{*survivors};
    try {
      all_reduce(v, ReduceOp::SUM, g);
      require(false, "all_reduce succeeded without rank 1");
    } catch (const DistBackendError& e) {
      std::string m = e.what();
      std::fprintf(stderr, "[rank %d] got, as expected: %s\n", rank, m.c_str());
      require(contains(m, "all_reduce #1"), "no op/sequence in: " + m);
      require(contains(m, "rank 1"), "no peer in: " + m);
      require(contains(m, "Timed out after 1500 ms"), "no timeout in: " + m);
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

// A rank stopped by SIGSTOP in a ring all_reduce over TCP: rank 3 waits for
// it, rank 0 for rank 3, rank 1 for rank 0, and their deadlines expire
// together. Every survivor must blame the stopped rank 2 (directly, or at the
// end of the chain of waits it heard of), never a healthy rank it waited for.
TEST(Failure, SurvivorsOfAStoppedRankBlameItNotTheRanksWaitingForIt) {
  ScopedEnv tcp("TDIST_SHM", "0");
  ScopedEnv ring("TDIST_ALGO_ALL_REDUCE", "ring");
  Shared<PortBoard> board;
  Shared<SurvivorCount> survivors;
  Shared<std::atomic<pid_t>> stopped;
  constexpr int n = 4, kStopped = 2;
  auto results = run_in_processes(n, [&](int rank) {
    init_process_world(*board, rank, n, milliseconds(30000));
    // 10 s: the ranks listen 1 s for each other's notices, far more than the
    // skew between their deadlines on a loaded machine.
    Group g = new_group({}, milliseconds(10000));
    std::vector<float> v(64 * 1024, 1.0f);
    all_reduce(v, ReduceOp::SUM, g);  // every connection is up
    if (rank == kStopped) {
      stopped->store(getpid());
      raise(SIGSTOP);  // killed by rank 0 once the survivors are done
      return;
    }
    std::string m;
    try {
      all_reduce(v, ReduceOp::SUM, g);
    } catch (const DistError& e) {
      m = e.what();
    }
    survivors->done.fetch_add(1);
    std::fprintf(stderr, "[rank %d] got: %s\n", rank, m.c_str());
    if (rank == 0) {
      survivors->wait_for(n - 1);
      while (stopped->load() == 0) std::this_thread::sleep_for(milliseconds(5));
      kill(stopped->load(), SIGKILL);
    }
    require(!m.empty(), "all_reduce succeeded without rank 2");
    require(contains(m, "all_reduce #2"), "no op/sequence in: " + m);
    const bool direct =
        std::regex_search(m, std::regex(R"(from rank 2 at [0-9.:]+: Timed out after 10000 ms \(the peer may be stalled)"));
    const bool chained =
        std::regex_search(m, std::regex(R"(: rank 2 at [0-9.:]+ is stalled, dead, or in a different operation \(it sent nothing)"));
    require(direct || chained, "the error does not blame rank 2: " + m);
  });
  for (int r = 0; r < n; ++r) {
    if (r == kStopped) EXPECT_EQ(results[r].signal, SIGKILL) << results[r].describe();
    else EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].describe();
  }
}

TEST(Failure, DisagreeingSizesAreAnErrorNotAHang) {
  Shared<PortBoard> board;
  auto results = run_in_processes(2, [&](int rank) {
    init_process_world(*board, rank, 2, milliseconds(20000));
    std::vector<float> v(rank == 0 ? 10 : 20, 1.0f);
    try {
      all_reduce(v);
      require(false, "all_reduce of 10 and 20 elements succeeded");
    } catch (const DistError& e) {
      require(contains(e.what(), "size mismatch") || contains(e.what(), "gave up"),
              std::string("unexpected error: ") + e.what());
    }
    for (float x : v) require(x == 1.0f, "buffer was overwritten after the mismatch");
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Failure, PeerClosingItsGroupFailsPendingReceive) {
  Shared<PortBoard> board;
  auto results = run_in_processes(2, [&](int rank) {
    init_process_world(*board, rank, 2, milliseconds(20000));
    int x = 0;
    if (rank == 1) {
      destroy_process_group();  // never sends
      return;
    }
    try {
      recv(Tensor(&x, 1), 1);
      require(false, "recv succeeded from a destroyed peer");
    } catch (const DistNetworkError& e) {
      require(contains(e.what(), "rank 1"), std::string("peer not named: ") + e.what());
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Failure, DestroyingAGroupFailsItsPendingWorkAtOnce) {
  auto store = std::make_shared<HashStore>();
  std::shared_ptr<Work> pending;
  std::atomic<bool> shut_down{false};
  run_in_threads(2, [&](int rank) {
    ProcessGroupOptions o;
    o.timeout = std::chrono::minutes(10);  // far beyond the test's own limit
    ProcessGroup pg(store, rank, 2, o);
    pg.barrier()->wait();
    if (rank == 0) {
      std::vector<int> v(4, 1);
      pending = pg.all_reduce(v);  // rank 1 never joins it
      pg.shutdown();
      shut_down = true;
    } else {
      // Only after rank 0 is gone: a message of a different collective
      // arriving first would fail the all_reduce as out of step instead.
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!shut_down && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    pg.barrier();  // rank 1: fails when it hears that rank 0 gave up
  });
  try {
    pending->wait();
    FAIL() << "the pending all_reduce succeeded";
  } catch (const DistError& e) {
    EXPECT_TRUE(contains(e.what(), "destroyed")) << e.what();
  }
}

TEST(Failure, DifferentCollectivesAtTheSameStepAreReportedAtOnce) {
  Shared<PortBoard> board;
  auto results = run_in_processes(2, [&](int rank) {
    // A long timeout: the error must come from the out-of-step detection, not the deadline.
    init_process_world(*board, rank, 2, milliseconds(120000));
    std::vector<float> v(16, 1.0f);
    // The root of a broadcast only sends, so it may finish before it can know;
    // then its next call must fail with the cause.
    try {
      if (rank == 0)
        all_reduce(v);
      else
        broadcast(v, 1);
      barrier();
      require(false, "all_reduce on one rank and broadcast on the other succeeded");
    } catch (const DistError& e) {
      std::string m = e.what();
      std::fprintf(stderr, "[rank %d] got, as expected: %s\n", rank, m.c_str());
      require(contains(m, "out of step"), "not reported as out of step: " + m);
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Failure, DebugDetailNamesRanksThatPassedDifferentRoots) {
  Shared<PortBoard> board;
  auto results = run_in_processes(3, [&](int rank) {
    setenv("TDIST_DEBUG", "DETAIL", 1);
    init_process_world(*board, rank, 3, milliseconds(120000));
    std::vector<int> v(4, rank);
    all_reduce(v);  // agreeing calls pass the check
    require(v[0] == 3, "all_reduce under DETAIL gave " + std::to_string(v[0]));
    try {
      broadcast(v, rank == 2 ? 1 : 0);  // rank 2 disagrees on the root
      require(false, "broadcast with different roots succeeded");
    } catch (const DistBackendError& e) {
      std::string m = e.what();
      std::fprintf(stderr, "[rank %d] got, as expected: %s\n", rank, m.c_str());
      require(contains(m, "ranks [0,1] called broadcast root=0") && contains(m, "ranks [2] called broadcast root=1"),
              "the disagreement is not spelled out: " + m);
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Failure, RankThatClosesItsSocketsIsNamed) {
  Shared<PortBoard> board;
  Shared<SurvivorCount> survivors;
  auto results = run_in_processes(3, [&](int rank) {
    init_process_world(*board, rank, 3, milliseconds(20000));
    std::vector<double> v(100, 1.0);
    all_reduce(v);
    if (rank == 1) {
      // Close every socket (store and peers) without exiting or telling anyone.
      for (int fd = 3; fd < 1024; ++fd) close(fd);
      survivors->wait_for(2);
      _exit(0);
    }
    struct Done {
      SurvivorCount& c;
      ~Done() { c.done.fetch_add(1); }
    } done{*survivors};
    try {
      all_reduce(v);
      require(false, "all_reduce succeeded although rank 1 closed its sockets");
    } catch (const DistError& e) {
      std::string m = e.what();
      std::fprintf(stderr, "[rank %d] got, as expected: %s\n", rank, m.c_str());
      require(contains(m, "all_reduce #2") && contains(m, "rank 1"), "op or peer not named: " + m);
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

}  // namespace
}  // namespace tdist::testing
