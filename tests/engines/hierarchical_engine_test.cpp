// The hierarchical engine over emulated hosts: each rank is a process whose
// TDIST_HOST_ID names its host, so ranks of one "host" share memory and the
// others talk over TCP. Checked: which engine a group picks (hosts with
// several ranks; not one rank per host; not with TDIST_HIERARCHICAL=0), and
// every collective against locally computed results (common/collective_matrix.h)
// on even, uneven and interleaved placements, for the leader paths and the
// split paths.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <string>
#include <vector>

#include "backends/process_world.h"
#include "common/collective_matrix.h"
#include "backends/tdist_backend.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

using matrix::require;

std::string engine_of(const Group& group, size_t bytes) {
  auto& backend = dynamic_cast<TdistBackend&>(group->backend_for(Device{}));
  return backend.engine_name(OpCode::AllReduce, bytes);
}

// Every size from empty to past the split paths' threshold: the replicated,
// leader and split all_reduce among them.
void check_group(const Group& group, const std::string& where) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, size_t{5003}, size_t{40000} + 3})
    matrix::check_collectives(group, count, where);
  // Split paths that need the count to divide among a host's ranks; over
  // 2 MiB, the split all_reduce's pipeline of segments.
  matrix::check_large(group, size_t{3 * 4 * 5 * 7 * 8 * 64 * 3}, where);
  barrier(group)->wait();
}

// hosts[r]: rank r's emulated host.
void run_on_hosts(const std::vector<int>& hosts, const std::function<void(int)>& body) {
  Shared<PortBoard> board;
  const int n = static_cast<int>(hosts.size());
  auto results = run_in_processes(n, [&](int rank) {
    setenv("TDIST_HOST_ID", ("host" + std::to_string(hosts[rank])).c_str(), 1);
    init_process_world(*board, rank, n, std::chrono::seconds(60));
    body(rank);
    destroy_process_group();
  }, std::chrono::seconds(240));
  EXPECT_EQ(describe_failures(results), "");
}

TEST(HierarchicalEngine, TwoHostsOfTwo) {
  run_on_hosts({0, 0, 1, 1}, [](int) {
    require(engine_of(group_world(), 1 << 20) == "hierarchical", "2x2 picked " + engine_of(group_world(), 1 << 20));
    check_group(group_world(), "2x2");
  });
}

TEST(HierarchicalEngine, ThreeHostsOfTwoInterleaved) {
  run_on_hosts({0, 1, 2, 0, 1, 2}, [](int) {
    require(engine_of(group_world(), 8) == "hierarchical", "3x2 picked " + engine_of(group_world(), 8));
    check_group(group_world(), "3x2 interleaved");
  });
}

TEST(HierarchicalEngine, UnevenHostsOfOneTwoAndThree) {
  run_on_hosts({0, 1, 1, 2, 2, 2}, [](int) {
    require(engine_of(group_world(), 1 << 20) == "hierarchical", "1+2+3 picked " + engine_of(group_world(), 1 << 20));
    check_group(group_world(), "1+2+3");
  });
}

// Subgroups of a 2x2 world: one rank per host runs flat; a group with two
// ranks on one host and one on the other is hierarchical and uneven.
TEST(HierarchicalEngine, SubgroupsPickByTheirOwnPlacement) {
  run_on_hosts({0, 0, 1, 1}, [](int rank) {
    Group across = new_group({0, 2});
    Group uneven = new_group({0, 1, 2});
    if (rank == 0 || rank == 2) {
      require(engine_of(across, 1 << 20) == "transport", "one rank per host picked " + engine_of(across, 1 << 20));
      check_group(across, "ranks 0 and 2");
    }
    if (rank != 3) {
      require(engine_of(uneven, 1 << 20) == "hierarchical", "2+1 picked " + engine_of(uneven, 1 << 20));
      check_group(uneven, "ranks 0, 1 and 2");
    }
  });
}

TEST(HierarchicalEngine, OffByTheSetting) {
  ScopedEnv off("TDIST_HIERARCHICAL", "0");
  run_on_hosts({0, 0, 1, 1}, [](int) {
    require(engine_of(group_world(), 1 << 20) == "transport",
            "TDIST_HIERARCHICAL=0 picked " + engine_of(group_world(), 1 << 20));
    check_group(group_world(), "2x2 flat");
  });
}

}  // namespace
}  // namespace tdist::testing
