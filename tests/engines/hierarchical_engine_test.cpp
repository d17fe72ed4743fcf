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
#include "trace/timeline.h"
#ifndef TDIST_NO_TRACE_TOOL
#include "trace/trace_test_util.h"
#endif

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

#ifndef TDIST_NO_TRACE_TOOL
// One rank's timeline file, its operation lines and its step lines.
struct TimelineLines {
  std::vector<ttrace::JsonValue> ops, steps;
};
TimelineLines read_timeline(const std::string& path) {
  std::ifstream in(path);
  TimelineLines lines;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    ttrace::JsonValue v = trace_test::parse(line);
    (v.find("step") ? lines.steps : lines.ops).push_back(std::move(v));
  }
  return lines;
}
std::string text_of(const ttrace::JsonValue& v, const char* key) {
  const ttrace::JsonValue* m = v.find(key);
  return m && m->is_string() ? m->as_string() : "";
}
int64_t int_of(const ttrace::JsonValue& v, const char* key) {
  const ttrace::JsonValue* m = v.find(key);
  return m && m->is_int() ? m->as_int() : -1;
}

// With TDIST_TRACE, each step of a hierarchical operation is a step line of
// the timeline: where it ran, its number, its collective and engine, inside
// the operation's time. A small all_reduce runs in two steps (inside each
// host, then among hosts); one of 3 MiB in 3 segments of 3 steps, the steps
// among hosts on the pipeline's helper thread.
TEST(HierarchicalEngine, StepsOnTheTimeline) {
  trace_test::TempDir dir;
  ScopedEnv trace("TDIST_TRACE", dir.path().c_str());
  constexpr size_t kLarge = 3 * (size_t{1} << 20) / sizeof(float);
  run_on_hosts({0, 0, 1, 1}, [](int rank) {
    std::vector<float> small(8, 1.0f), large(kLarge, float(rank));
    all_reduce(Tensor(small), ReduceOp::SUM, group_world())->wait();
    all_reduce(Tensor(large), ReduceOp::SUM, group_world())->wait();
    require(small[0] == 4.0f && large[kLarge - 1] == 6.0f, "wrong sums");
    trace::flush_timeline();
  });
  for (int rank = 0; rank < 4; ++rank) {
    const TimelineLines t = read_timeline(dir.file("tdist_trace_" + std::to_string(rank) + ".jsonl"));
    std::vector<const ttrace::JsonValue*> reduces;
    for (const auto& op : t.ops)
      if (text_of(op, "op") == "all_reduce") reduces.push_back(&op);
    ASSERT_EQ(reduces.size(), 2u) << "rank " << rank;
    for (size_t k = 0; k < 2; ++k) {
      const ttrace::JsonValue& op = *reduces[k];
      EXPECT_EQ(text_of(op, "engine"), "hierarchical");
      // Expected steps by part: where, collective, engine, thread.
      struct Want {
        std::string where, op, engine;
        int64_t thread;
      };
      std::vector<Want> want;
      if (k == 0) {
        want = {{"inside host", "all_reduce", "shm", 0}, {"among hosts", "all_reduce", "transport", 0}};
      } else {
        for (int segment = 0; segment < 3; ++segment) {
          want.push_back({"inside host", "reduce_scatter", "shm", 0});
          want.push_back({"among hosts", "all_reduce", "transport", 1});
          want.push_back({"inside host", "all_gather", "shm", 0});
        }
      }
      std::vector<const ttrace::JsonValue*> parts(want.size(), nullptr);
      for (const auto& st : t.steps) {
        if (int_of(st, "seq") != int_of(op, "seq")) continue;
        const int64_t part = int_of(st, "part");
        ASSERT_TRUE(part >= 0 && part < static_cast<int64_t>(want.size())) << "rank " << rank << " part " << part;
        EXPECT_EQ(parts[part], nullptr) << "rank " << rank << " part " << part << " twice";
        parts[part] = &st;
      }
      for (size_t p = 0; p < want.size(); ++p) {
        const std::string where = "rank " + std::to_string(rank) + " all_reduce " + std::to_string(k) + " part " +
                                  std::to_string(p);
        ASSERT_NE(parts[p], nullptr) << where << ": no step line";
        const ttrace::JsonValue& st = *parts[p];
        EXPECT_EQ(text_of(st, "step"), want[p].where) << where;
        EXPECT_EQ(text_of(st, "op"), want[p].op) << where;
        EXPECT_EQ(text_of(st, "engine"), want[p].engine) << where;
        EXPECT_EQ(int_of(st, "thread"), want[p].thread) << where;
        EXPECT_EQ(text_of(st, "group"), "default_pg") << where;
        EXPECT_EQ(text_of(st, "state"), "completed") << where;
        EXPECT_GT(int_of(st, "bytes"), 0) << where;
        // Inside the operation: both are read from the system clock, the operation's through
        // the cycle counter's conversion (a few µs apart at most; 2 ms of slack).
        EXPECT_LE(int_of(st, "started_us"), int_of(st, "ended_us")) << where;
        EXPECT_GE(int_of(st, "started_us"), int_of(op, "started_us") - 2000) << where;
        EXPECT_LE(int_of(st, "ended_us"), int_of(op, "ended_us") + 2000) << where;
      }
    }
  }
  // The tool draws them: 2 + 9 steps on each of the 4 ranks.
  const trace_test::ToolResult merged = trace_test::run_tool({"--timeline", dir.path(), "-o", dir.file("t.json")});
  ASSERT_EQ(merged.exit_code, 0) << merged.all();
  const ttrace::JsonValue doc = trace_test::parse(trace_test::read_text(dir.file("t.json")));
  const ttrace::JsonValue* events = doc.find("traceEvents");
  ASSERT_NE(events, nullptr) << merged.all();
  size_t steps = 0;
  for (const auto& e : events->items()) steps += text_of(e, "cat") == "step";
  EXPECT_EQ(steps, 4u * 11u) << merged.all();
}
#endif

}  // namespace
}  // namespace tdist::testing
