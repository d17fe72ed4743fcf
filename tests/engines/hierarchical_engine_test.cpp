// The hierarchical engine over emulated hosts: each rank is a process whose
// TDIST_HOST_ID names its host, so ranks of one "host" share memory and the
// others talk over TCP. Checked: which engine a group picks (hosts with
// several ranks; not one rank per host; not with TDIST_HIERARCHICAL=0), and
// all_reduce, broadcast, all_gather, reduce_scatter and barrier against
// locally computed results on even, uneven and interleaved placements, for
// the leader paths and the split paths.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <functional>
#include <type_traits>
#include <string>
#include <vector>

#include "backends/process_world.h"
#include "backends/tdist_backend.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

std::string engine_of(const Group& group, size_t bytes) {
  auto& backend = dynamic_cast<TdistBackend&>(group->backend_for(Device{}));
  return backend.engine_name(OpCode::AllReduce, bytes);
}

// Rank r's element i, for each op (small integers: every sum is exact).
double input(int r, size_t i) { return static_cast<double>((r * 7 + static_cast<int>(i % 11)) % 13 + 1); }

template <typename T>
void check_all_reduce(const Group& group, int n, size_t count, ReduceOp op, const std::string& where) {
  const int me = get_rank(group);
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>(input(me, i));
  all_reduce(Tensor(data.data(), count), op, group)->wait();
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) {
      const double v = input(r, i);
      want = op == ReduceOp::MAX ? std::max(want, v) : want + v;
    }
    if (op == ReduceOp::AVG) want = std::is_integral_v<T> ? std::trunc(want / n) : want / n;  // integers truncate
    const double got = static_cast<double>(data[i]);
    require(std::fabs(got - want) <= 1e-4 * std::fabs(want),
            where + ": element " + std::to_string(i) + " of " + std::to_string(count) + " is " +
                std::to_string(got) + ", expected " + std::to_string(want));
  }
}

// Rank r's value at element i of a broadcast or a gathered block.
int32_t value(int r, size_t i) { return static_cast<int32_t>(r * 100003 + static_cast<int>(i)); }

void check_broadcast(const Group& group, size_t count, int root, const std::string& where) {
  const int me = get_rank(group);
  std::vector<int32_t> data(count, -1);
  if (me == root)
    for (size_t i = 0; i < count; ++i) data[i] = value(root, i);
  broadcast(Tensor(data.data(), count), group_src(root), group)->wait();
  for (size_t i = 0; i < count; ++i)
    require(data[i] == value(root, i), where + ": broadcast from " + std::to_string(root) + ", element " +
                                           std::to_string(i) + " is " + std::to_string(data[i]));
}

void check_all_gather(const Group& group, int n, size_t count, const std::string& where) {
  const int me = get_rank(group);
  std::vector<int32_t> in(count), out(count * n, -1);
  for (size_t i = 0; i < count; ++i) in[i] = value(me, i);
  std::vector<Tensor> outs;
  for (int r = 0; r < n; ++r) outs.push_back(Tensor(out.data() + r * count, count));
  all_gather(outs, Tensor(in.data(), count), group)->wait();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      require(out[r * count + i] == value(r, i), where + ": all_gather, rank " + std::to_string(r) + "'s element " +
                                                     std::to_string(i) + " is " +
                                                     std::to_string(out[r * count + i]));
}

template <typename T>
void check_reduce_scatter(const Group& group, int n, size_t count, ReduceOp op, const std::string& where) {
  const int me = get_rank(group);
  // Rank r's block for rank d, element i: input(r, d * count + i).
  std::vector<T> in(count * n), out(count, T(-1));
  for (size_t k = 0; k < in.size(); ++k) in[k] = static_cast<T>(input(me, k));
  std::vector<Tensor> ins;
  for (int d = 0; d < n; ++d) ins.push_back(Tensor(in.data() + d * count, count));
  reduce_scatter(Tensor(out.data(), count), ins, op, group)->wait();
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) {
      const double v = input(r, me * count + i);
      want = op == ReduceOp::MAX ? std::max(want, v) : want + v;
    }
    if (op == ReduceOp::AVG) want = std::is_integral_v<T> ? std::trunc(want / n) : want / n;
    const double got = static_cast<double>(out[i]);
    require(std::fabs(got - want) <= 1e-4 * std::fabs(want),
            where + ": reduce_scatter, element " + std::to_string(i) + " is " + std::to_string(got) +
                ", expected " + std::to_string(want));
  }
}

// Every size from empty to past the split paths' threshold, several dtypes,
// ops and roots.
void check_group(const Group& group, const std::string& where) {
  const int n = get_world_size(group);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, size_t{40000} + 3}) {
    const std::string at = where + ", " + std::to_string(count) + " elements";
    check_all_reduce<float>(group, n, count, ReduceOp::SUM, at + ", float32 SUM");
    check_all_reduce<int64_t>(group, n, count, ReduceOp::MAX, at + ", int64 MAX");
    check_all_reduce<double>(group, n, count, ReduceOp::AVG, at + ", float64 AVG");
    check_all_reduce<int32_t>(group, n, count, ReduceOp::AVG, at + ", int32 AVG");
    for (int root : {0, n / 2, n - 1}) check_broadcast(group, count, root, at);
    check_all_gather(group, n, count, at);
    check_reduce_scatter<float>(group, n, count, ReduceOp::SUM, at + ", float32 SUM");
    check_reduce_scatter<double>(group, n, count, ReduceOp::AVG, at + ", float64 AVG");
    check_reduce_scatter<int64_t>(group, n, count, ReduceOp::MAX, at + ", int64 MAX");
  }
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
