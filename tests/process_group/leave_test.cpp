// Forked processes: a rank that destroys its group while a peer waits for it
// says goodbye (a notice on its sockets, a mark in the shared-memory arena),
// so the peer fails at once naming it as having left, instead of waiting for
// the group's timeout or blaming a crash; and destroy itself returns promptly
// (it does not wait for rank 0, which is busy in the operation its peer left).
#include <atomic>
#include <chrono>
#include <thread>

#include "common/scoped_env.h"
#include "process_group/process_util.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// Long against every wait below, so that only a goodbye can end them in time.
constexpr milliseconds kLongTimeout = seconds(60);
// Far below kLongTimeout, far above any load: today's behaviour (waiting
// for the timeout, or for the leaver's process to exit after a 10 s destroy)
// cannot pass it, a goodbye cannot miss it.
constexpr milliseconds kPrompt = seconds(15);

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Rank 1 destroys the default group while rank 0 waits for it in `wait`
// (which needs rank 1); rank 1's process stays alive until rank 0 is done, so
// nothing but its goodbye can tell rank 0. The pair talks once before, so
// that it has its connection (pairs connect on first use).
// `subgroup`: rank 1 destroys a group made by new_group (a communicator over
// the default group's connections) instead of the default group.
void expect_goodbye(const char* shm, const char* what, const std::function<void(const Group&)>& wait,
                    bool subgroup = false) {
  ScopedEnv transport("TDIST_SHM", shm);
  Shared<std::atomic<int>> rank0_done;
  const int port = free_port();
  auto results = run_in_processes(
      2,
      [&](int rank) {
        init_process_group("tdist", "tcp://127.0.0.1:" + std::to_string(port), 2, rank, kLongTimeout);
        Group g = subgroup ? new_group({0, 1}, kLongTimeout) : nullptr;
        std::vector<int32_t> v(4, 1);
        all_reduce(v, ReduceOp::SUM, g);
        if (rank == 1) {
          // Rank 0 is waiting by then (if not, it fails as well: rank 1 is gone).
          std::this_thread::sleep_for(milliseconds(300));
          const auto start = Clock::now();
          destroy_process_group(g);
          const double took = seconds_since(start);
          std::fprintf(stderr, "[rank 1] destroy_process_group took %.2f s\n", took);
          require(took < std::chrono::duration<double>(kPrompt).count(),
                  "destroy_process_group took " + std::to_string(took) + " s");
          const auto end = Clock::now() + seconds(90);
          while (rank0_done->load() == 0 && Clock::now() < end) std::this_thread::sleep_for(milliseconds(5));
          if (subgroup) destroy_process_group();
          return;
        }
        const auto start = Clock::now();
        try {
          wait(g);
          rank0_done->store(1);
          require(false, std::string(what) + " succeeded though rank 1 left the group");
        } catch (const DistError& e) {
          rank0_done->store(1);
          const double took = seconds_since(start);
          const std::string m = e.what();
          std::fprintf(stderr, "[rank 0] after %.2f s, got as expected: %s\n", took, m.c_str());
          require(took < std::chrono::duration<double>(kPrompt).count(),
                  std::string(what) + " failed only after " + std::to_string(took) + " s: " + m);
          require(has(m, what) && has(m, "rank 1 at ") && has(m, "left the group") &&
                      has(m, "destroy_process_group"),
                  "the error does not say that rank 1 left the group: " + m);
        }
        destroy_process_group();
      },
      seconds(120));
  EXPECT_EQ(describe_failures(results), "");
}

void all_reduce_needing_rank_1(const Group& g) {
  std::vector<int32_t> v(4, 1);
  all_reduce(v, ReduceOp::SUM, g);
}

void recv_from_rank_1(const Group& g) {
  std::vector<int32_t> v(4, 0);
  recv(v, 1, g);
}

TEST(Leave, APeerInAnAllReduceOverSharedMemoryHearsTheRankLeft) {
  expect_goodbye("1", "all_reduce #2", all_reduce_needing_rank_1);
}

TEST(Leave, APeerInAnAllReduceOverTcpHearsTheRankLeft) {
  expect_goodbye("0", "all_reduce #2", all_reduce_needing_rank_1);
}

TEST(Leave, APeerInARecvOverSharedMemoryHearsTheRankLeft) { expect_goodbye("1", "recv", recv_from_rank_1); }

TEST(Leave, APeerInARecvOverTcpHearsTheRankLeft) { expect_goodbye("0", "recv", recv_from_rank_1); }

// A group over the default group's connections: the goodbye names the
// communicator (wire::kLeaveMagic), the shared connections stay.
TEST(Leave, APeerInASubgroupAllReduceOverSharedMemoryHearsTheRankLeft) {
  expect_goodbye("1", "all_reduce #2", all_reduce_needing_rank_1, true);
}

TEST(Leave, APeerInASubgroupAllReduceOverTcpHearsTheRankLeft) {
  expect_goodbye("0", "all_reduce #2", all_reduce_needing_rank_1, true);
}

TEST(Leave, APeerInASubgroupRecvOverTcpHearsTheRankLeft) {
  expect_goodbye("0", "recv", recv_from_rank_1, true);
}

TEST(Leave, APeerInASubgroupRecvOverSharedMemoryHearsTheRankLeft) {
  expect_goodbye("1", "recv", recv_from_rank_1, true);
}

// Ranks as threads of one process (a process of its own cannot tell a
// departed peer from a slow one: its pid lives on): the group's shutdown,
// which destroy_process_group calls, says goodbye the same way.
void expect_goodbye_between_threads(const char* shm) {
  ScopedEnv transport("TDIST_SHM", shm);
  std::atomic<int> rank0_done{0};
  with_thread_world(
      2,
      [&](ProcessGroup& pg) {
        std::vector<int32_t> v(4, 1);
        pg.all_reduce(Tensor(v))->wait();  // connects the pair
        if (pg.rank() == 1) {
          std::this_thread::sleep_for(milliseconds(300));
          pg.shutdown();
          while (rank0_done.load() == 0) std::this_thread::sleep_for(milliseconds(5));
          return;
        }
        const auto start = Clock::now();
        try {
          pg.all_reduce(Tensor(v))->wait();
          rank0_done.store(1);
          ADD_FAILURE() << "all_reduce succeeded though rank 1 left the group";
        } catch (const DistError& e) {
          rank0_done.store(1);
          EXPECT_LT(Clock::now() - start, kPrompt) << e.what();
          EXPECT_TRUE(has(e.what(), "rank 1 at ") && has(e.what(), "left the group")) << e.what();
        }
      },
      kLongTimeout);
}

TEST(Leave, BetweenThreadsOverSharedMemory) { expect_goodbye_between_threads("1"); }

TEST(Leave, BetweenThreadsOverTcp) { expect_goodbye_between_threads("0"); }

}  // namespace
}  // namespace tdist::testing
