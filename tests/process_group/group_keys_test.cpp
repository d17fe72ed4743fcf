// Groups made and destroyed by the hundred leave the store as it was: the
// keys of a group's set-up (addresses, the shared-memory segment's name and
// outcome) are deleted once every rank has read them.
#include <gtest/gtest.h>

#include "backends/process_world.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

void cycles_leave_no_keys(bool shm) {
  ScopedEnv use_shm("TDIST_SHM", shm ? "1" : "0");
  Shared<PortBoard> board;
  Shared<std::atomic<int64_t>> before, after;
  const int n = 3;
  auto results = run_in_processes(
      n,
      [&](int rank) {
        auto store = process_world_store(*board, rank, n, std::chrono::seconds(30));
        init_process_group(InitOptions{.world_size = n, .rank = rank, .store = store});
        barrier();  // the default group's own set-up is done
        for (int i = 0; i < 40; ++i) {
          if (i == 5) {
            barrier();
            if (rank == 0) *before = store->num_keys();
          }
          auto g = new_group({0, 1, 2});
          std::vector<int32_t> v(5, rank);
          all_reduce(v, ReduceOp::SUM, g);
          if (v[0] != 3) throw std::runtime_error("wrong all_reduce result");
          destroy_process_group(g);
        }
        barrier();
        if (rank == 0) *after = store->num_keys();
        barrier();
        destroy_process_group();
      },
      std::chrono::seconds(120));
  ASSERT_EQ(describe_failures(results), "");
  // Before the keys were deleted, each group left 8 (51 -> 331 over 40 groups).
  EXPECT_LE(after->load(), before->load()) << "35 more groups made and destroyed left keys in the store";
}

TEST(GroupKeys, FortyGroupsOverTcpLeaveNoKeys) { cycles_leave_no_keys(false); }
TEST(GroupKeys, FortyGroupsOverSharedMemoryLeaveNoKeys) { cycles_leave_no_keys(true); }

}  // namespace
}  // namespace tdist::testing
