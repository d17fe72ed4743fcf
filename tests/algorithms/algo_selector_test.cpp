// The selector's automatic picks at the edges of their thresholds, on one
// host and across hosts, its one decision per call, the forced algorithms
// checked when a group is made, the tuning tables as docs/algorithms.md
// shows them, and the all_to_all Bruck precondition.
#include "algorithms/pipeline.h"
#include "algorithms/selector.h"
#include "algorithms/tuning_table.h"
#include "algorithms/algo_test_util.h"
#include "transport/memory_transport.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tdist::testing {
namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;
Shape on_one_host(size_t bytes, int n, size_t count = ~size_t{0}) { return Shape{bytes, count, n, 1, n}; }
Shape across_hosts(size_t bytes, int n, size_t count = ~size_t{0}) { return Shape{bytes, count, n, n, 1}; }
Shape hosts_of(int hosts, int per_host, size_t bytes) {
  return Shape{bytes, bytes / 4, hosts * per_host, hosts, per_host};
}

// Shared memory wherever the group has it, whatever the size; a forced
// transport algorithm wins; the hierarchical engine only for groups of several
// hosts with several ranks on some, and only where a group has one.
TEST(EngineSelector, PicksByShapeAndWhatTheGroupHas) {
  const EnginesAvailable none{}, shm{true, false}, hier{false, true};
  for (size_t bytes : {size_t{0}, size_t{8}, 64 * KiB, 64 * MiB}) {
    EXPECT_EQ(pick_engine(on_one_host(bytes, 4), "", shm), EngineKind::SharedMemory);
    EXPECT_EQ(pick_engine(on_one_host(bytes, 4), "shm", shm), EngineKind::SharedMemory);
    EXPECT_EQ(pick_engine(on_one_host(bytes, 4), "ring", shm), EngineKind::Transport);
    EXPECT_EQ(pick_engine(on_one_host(bytes, 4), "", none), EngineKind::Transport);
    EXPECT_EQ(pick_engine(hosts_of(2, 4, bytes), "", hier), EngineKind::Hierarchical);
    EXPECT_EQ(pick_engine(hosts_of(2, 4, bytes), "", none), EngineKind::Transport);
    EXPECT_EQ(pick_engine(hosts_of(2, 4, bytes), "ring", hier), EngineKind::Transport);
    EXPECT_EQ(pick_engine(hosts_of(4, 1, bytes), "", hier), EngineKind::Transport);  // nothing inside a host
  }
}

// Hosts and ranks per host, counted from the transport's host ids alike on
// every rank (2 hosts x 3 ranks, 3 x 2, one host, and one rank per host).
TEST(EngineSelector, PlacementCountsHostsAndRanksPerHost) {
  struct Case { int size, per_host, hosts, max_per_host; };
  for (Case c : {Case{6, 3, 2, 3}, Case{6, 2, 3, 2}, Case{5, 0, 1, 5}, Case{4, 1, 4, 1}, Case{5, 2, 3, 2}}) {
    FabricFaults f;
    f.ranks_per_host = c.per_host;
    MemoryFabric fabric(c.size, f);
    for (int r = 0; r < c.size; ++r) {
      Placement where = placement_of(*fabric.endpoint(r));
      EXPECT_EQ(where.hosts, c.hosts) << "rank " << r << " of " << c.size;
      EXPECT_EQ(where.ranks_per_host, c.max_per_host) << "rank " << r << " of " << c.size;
    }
  }
}

TEST(AlgorithmSelector, AllReduceBySizeWorldAndPlacement) {
  EXPECT_EQ(pick_all_reduce(on_one_host(256 * KiB, 4)), "recursive_doubling");
  EXPECT_EQ(pick_all_reduce(on_one_host(1 * MiB, 4)), "rabenseifner");
  EXPECT_EQ(pick_all_reduce(on_one_host(1 * MiB, 2)), "rabenseifner");
  EXPECT_EQ(pick_all_reduce(on_one_host(1 * MiB, 3)), "ring");  // not a power of two: no fold
  EXPECT_EQ(pick_all_reduce(on_one_host(16 * MiB, 8)), "ring");
  EXPECT_EQ(pick_all_reduce(on_one_host(16 * MiB, 4)), "ring");
  EXPECT_EQ(pick_all_reduce(on_one_host(4 * MiB, 2)), "rabenseifner");
  EXPECT_EQ(pick_all_reduce(on_one_host(8 * MiB, 2)), "ring");  // in 1 MiB segments (segment_bytes)
  EXPECT_EQ(pick_all_reduce(on_one_host(16 * MiB, 8, 7)), "recursive_doubling");  // fewer elements than ranks
  EXPECT_EQ(pick_all_reduce(across_hosts(16 * KiB, 8)), "recursive_doubling");
  EXPECT_EQ(pick_all_reduce(across_hosts(64 * KiB, 8)), "rabenseifner");
  EXPECT_EQ(pick_all_reduce(across_hosts(1 * MiB, 8)), "ring");
}

TEST(AlgorithmSelector, PipelineSegmentsBySizeOfTheGroupAndPlacement) {
  EXPECT_EQ(segment_bytes(Pipeline::Ring, /*one_host=*/true, 2), 1 * MiB);
  EXPECT_EQ(segment_bytes(Pipeline::Ring, /*one_host=*/true, 4), 4 * MiB);
  EXPECT_EQ(segment_bytes(Pipeline::Ring, /*one_host=*/false, 2), 4 * MiB);
  EXPECT_EQ(segment_bytes(Pipeline::Chain, /*one_host=*/true, 2), 1 * MiB);
  EXPECT_EQ(segment_bytes(Pipeline::Chain, /*one_host=*/false, 8), 256 * KiB);
  ScopedEnv forced("TDIST_ALGO_SEGMENT_BYTES", "65536");
  EXPECT_EQ(segment_bytes(Pipeline::Ring, /*one_host=*/true, 2), 64 * KiB);
}

TEST(AlgorithmSelector, RootedCollectives) {
  EXPECT_EQ(pick_broadcast(on_one_host(16 * MiB, 8)), "binomial");
  EXPECT_EQ(pick_broadcast(across_hosts(16 * KiB, 8)), "binomial");
  EXPECT_EQ(pick_broadcast(across_hosts(1 * MiB, 8)), "chain");
  EXPECT_EQ(pick_broadcast(across_hosts(1 * MiB, 2)), "binomial");
  EXPECT_EQ(pick_reduce(on_one_host(256 * KiB, 8)), "binomial");
  EXPECT_EQ(pick_reduce(on_one_host(16 * MiB, 8)), "chain");
  EXPECT_EQ(pick_reduce(on_one_host(1 * MiB, 4)), "chain");
  EXPECT_EQ(pick_reduce(on_one_host(1 * MiB, 2)), "chain");
  EXPECT_EQ(pick_reduce(on_one_host(512 * KiB, 2)), "binomial");
  EXPECT_EQ(pick_reduce(across_hosts(16 * KiB, 12)), "binomial");
  EXPECT_EQ(pick_reduce(across_hosts(96 * KiB, 12)), "rabenseifner");
  EXPECT_EQ(pick_reduce(across_hosts(96 * KiB, 8)), "chain");
  EXPECT_EQ(pick_reduce(across_hosts(96 * KiB, 3)), "chain");
  EXPECT_EQ(pick_reduce(across_hosts(4 * KiB, 3)), "binomial");
  EXPECT_EQ(pick_reduce(across_hosts(8 * KiB, 4)), "binomial");
  EXPECT_EQ(pick_reduce(across_hosts(16 * KiB, 4)), "chain");
  EXPECT_EQ(pick_reduce(across_hosts(8 * KiB, 8)), "binomial");
  EXPECT_EQ(pick_reduce(across_hosts(16 * KiB, 8)), "chain");
  EXPECT_EQ(pick_reduce(across_hosts(128 * KiB, 4)), "chain");
  EXPECT_EQ(pick_reduce(across_hosts(1 * MiB, 8)), "chain");
  EXPECT_EQ(pick_reduce(across_hosts(1 * MiB, 3)), "chain");
  EXPECT_EQ(pick_reduce(across_hosts(1 * MiB, 2)), "binomial");
  EXPECT_EQ(pick_gather(on_one_host(1 * KiB, 16)), "linear");
  EXPECT_EQ(pick_scatter(on_one_host(1 * KiB, 8)), "binomial");
  EXPECT_EQ(pick_scatter(on_one_host(1 * KiB, 4)), "linear");
  EXPECT_EQ(pick_scatter(on_one_host(64 * KiB, 8)), "linear");
}

TEST(AlgorithmSelector, BlockCollectives) {
  EXPECT_EQ(pick_all_gather(on_one_host(16 * KiB, 4), true), "bruck");
  EXPECT_EQ(pick_all_gather(on_one_host(16 * KiB, 4), false), "ring");  // uneven blocks
  EXPECT_EQ(pick_all_gather(across_hosts(4 * MiB, 8), true), "ring");
  EXPECT_EQ(pick_all_gather(on_one_host(16 * KiB, 2), true), "ring");
  EXPECT_EQ(pick_reduce_scatter(on_one_host(64 * KiB, 4)), "recursive_halving");
  EXPECT_EQ(pick_reduce_scatter(across_hosts(1 * MiB, 8)), "ring");
  EXPECT_EQ(pick_reduce_scatter(across_hosts(64 * KiB, 8)), "recursive_halving");
  EXPECT_EQ(pick_reduce_scatter(across_hosts(64 * KiB, 3)), "ring");
  EXPECT_EQ(pick_reduce_scatter(across_hosts(64 * KiB, 6)), "ring");
  EXPECT_EQ(pick_reduce_scatter(across_hosts(64 * KiB, 12)), "recursive_halving");
  EXPECT_EQ(pick_reduce_scatter(across_hosts(8 * KiB, 3)), "recursive_halving");
  EXPECT_EQ(pick_reduce_scatter(on_one_host(64 * KiB, 3)), "recursive_halving");
  EXPECT_EQ(pick_all_to_all(on_one_host(1 * KiB, 8), true), "bruck");
  EXPECT_EQ(pick_all_to_all(on_one_host(1 * KiB, 8), false), "pairwise");  // a rank cannot tell alone
  EXPECT_EQ(pick_all_to_all(on_one_host(64 * KiB, 8), true), "pairwise");
  EXPECT_EQ(pick_all_to_all(across_hosts(1 * KiB, 8), true), "linear");
  EXPECT_EQ(pick_all_to_all(across_hosts(8 * KiB, 16), false), "linear");  // blocks may differ
  EXPECT_EQ(pick_all_to_all(across_hosts(64 * KiB, 8), true), "pairwise");
  EXPECT_EQ(pick_all_to_all(across_hosts(1 * KiB, 4), true), "bruck");
}

// Every rank sees uneven blocks: each refuses with a DistValueError.
TEST(AlgorithmSelector, ForcedBruckAllToAllRefusesUnevenBlocks) {
  ScopedEnv force("TDIST_ALGO_ALL_TO_ALL", "bruck");
  with_thread_world(2, [](ProcessGroup& pg) {
    // Rank r sends 2r+1 elements to rank 0 and 2r+2 to rank 1: no rank has blocks of one size.
    const int me = pg.rank();
    std::vector<float> in(4 * me + 3), out(me + 1 + me + 3);
    std::vector<Tensor> ins = {Tensor(in.data(), 2 * me + 1), Tensor(in.data() + 2 * me + 1, 2 * me + 2)};
    std::vector<Tensor> outs = {Tensor(out.data(), me + 1), Tensor(out.data() + me + 1, me + 3)};
    std::string msg = value_error_of([&] { pg.all_to_all(outs, ins)->wait(); }, "bruck all_to_all");
    require(has(msg, "one size") && has(msg, "pairwise"), "unhelpful error: " + msg);
  });
}


// What GroupEngines::decide answers without asking decide() (a group on one
// host with its segment, nothing forced): shared memory and no algorithm,
// for every operation and size, as decide() itself says.
TEST(EngineSelector, OneHostWithItsSegmentIsSharedMemoryForEveryOperation) {
  const ForcedAlgorithms none;
  for (uint8_t c = static_cast<uint8_t>(OpCode::Broadcast); c <= static_cast<uint8_t>(OpCode::HostStep); ++c)
    for (size_t bytes : {size_t{0}, size_t{8}, 64 * KiB, 256 * MiB})
      for (int ranks : {2, 3, 8}) {
        const Decision d = decide(static_cast<OpCode>(c), on_one_host(bytes, ranks, bytes / 4), none, {true, false});
        EXPECT_EQ(d.engine, EngineKind::SharedMemory) << int{c} << " " << bytes << " " << ranks;
        EXPECT_EQ(d.algorithm, Decision::kUndecided) << int{c};
        EXPECT_STREQ(d.algorithm_name, "") << int{c};
      }
}

// One decision names the engine and its algorithm together, as the engine
// choice and the algorithm's own pick would; a forced transport algorithm
// decides both.
TEST(EngineSelector, DecidesTheEngineAndItsAlgorithmAtOnce) {
  const ForcedAlgorithms none;
  const EnginesAvailable neither{}, shm{true, false}, hier{false, true};
  Decision d = decide(OpCode::AllReduce, on_one_host(1 * MiB, 4, 1 * MiB / 4), none, neither);
  EXPECT_EQ(d.engine, EngineKind::Transport);
  EXPECT_STREQ(d.algorithm_name, "rabenseifner");
  d = decide(OpCode::AllReduce, on_one_host(1 * MiB, 4, 1 * MiB / 4), none, shm);
  EXPECT_EQ(d.engine, EngineKind::SharedMemory);
  EXPECT_EQ(d.algorithm, Decision::kUndecided);
  EXPECT_STREQ(d.algorithm_name, "");
  d = decide(OpCode::AllReduce, hosts_of(2, 4, 1 * MiB), none, hier);
  EXPECT_EQ(d.engine, EngineKind::Hierarchical);
  EXPECT_STREQ(d.algorithm_name, "split");
  // replicated only where every rank's exchange among hosts makes few messages per host.
  EXPECT_STREQ(decide(OpCode::AllReduce, hosts_of(2, 2, 8), none, hier).algorithm_name, "replicated");
  EXPECT_STREQ(decide(OpCode::AllReduce, hosts_of(2, 2, 2 * KiB), none, hier).algorithm_name, "replicated");
  EXPECT_STREQ(decide(OpCode::AllReduce, hosts_of(2, 2, 8 * KiB), none, hier).algorithm_name, "leader");
  EXPECT_STREQ(decide(OpCode::AllReduce, hosts_of(2, 4, 8), none, hier).algorithm_name, "leader");
  EXPECT_STREQ(decide(OpCode::AllReduce, hosts_of(4, 2, 8), none, hier).algorithm_name, "leader");
  EXPECT_STREQ(decide(OpCode::AllReduce, hosts_of(3, 2, 8), none, hier).algorithm_name, "leader");
  EXPECT_STREQ(decide(OpCode::AllReduce, hosts_of(2, 4, 16 * KiB), none, hier).algorithm_name, "leader");
  EXPECT_STREQ(decide(OpCode::AllReduce, hosts_of(4, 2, 64 * KiB), none, hier).algorithm_name, "leader");
  EXPECT_STREQ(decide(OpCode::AllReduce, hosts_of(4, 2, 128 * KiB), none, hier).algorithm_name, "split");
  EXPECT_STREQ(decide(OpCode::Broadcast, hosts_of(2, 4, 1 * MiB), none, hier).algorithm_name, "split");
  EXPECT_STREQ(decide(OpCode::Reduce, hosts_of(4, 2, 128 * KiB), none, hier).algorithm_name, "leader");
  EXPECT_STREQ(decide(OpCode::Reduce, hosts_of(4, 2, 256 * KiB), none, hier).algorithm_name, "split");
  EXPECT_STREQ(decide(OpCode::Reduce, hosts_of(2, 2, 64 * KiB), none, hier).algorithm_name, "split");
  EXPECT_STREQ(decide(OpCode::AllGather, hosts_of(4, 2, 64 * KiB), none, hier).algorithm_name, "leader");
  EXPECT_STREQ(decide(OpCode::AllGather, hosts_of(4, 2, 128 * KiB), none, hier).algorithm_name, "split");
  EXPECT_STREQ(decide(OpCode::ReduceScatter, hosts_of(4, 2, 64 * KiB), none, hier).algorithm_name, "leader");
  EXPECT_STREQ(decide(OpCode::ReduceScatter, hosts_of(4, 2, 128 * KiB), none, hier).algorithm_name, "split");
  EXPECT_STREQ(decide(OpCode::AllToAll, hosts_of(2, 4, 1 * MiB), none, hier).algorithm_name, "flat");
  // Small blocks go grouped by host only where every rank's blocks have one size by the call.
  Shape even = hosts_of(4, 2, 1 * KiB);
  EXPECT_STREQ(decide(OpCode::AllToAll, even, none, hier).algorithm_name, "flat");
  even.even_split = true;
  EXPECT_STREQ(decide(OpCode::AllToAll, even, none, hier).algorithm_name, "split");
  even.uniform = false;
  EXPECT_STREQ(decide(OpCode::AllToAll, even, none, hier).algorithm_name, "flat");
  EXPECT_STREQ(decide(OpCode::Barrier, across_hosts(0, 4), none, neither).algorithm_name, "dissemination");
  ScopedEnv force("TDIST_ALGO_ALL_REDUCE", "RING");
  const ForcedAlgorithms forced = ForcedAlgorithms::from_environment();
  d = decide(OpCode::AllReduce, on_one_host(8, 4, 2), forced, shm);
  EXPECT_EQ(d.engine, EngineKind::Transport);
  EXPECT_STREQ(d.algorithm_name, "ring");
  EXPECT_EQ(forced.of(OpCode::Broadcast), ForcedAlgorithms::kNone);
  EXPECT_EQ(forced.of(OpCode::HostStep), ForcedAlgorithms::kNone);  // no table: nothing to force
}

// The settings are checked as they are read: a name that is not one of the
// collective's algorithms fails, naming the setting, its value and the valid
// names (a group reads them when it is made: algo_reduce_test.cpp); "shm"
// forces nothing among the transport algorithms.
TEST(EngineSelector, ForcedAlgorithmsAreCheckedWhenRead) {
  {
    ScopedEnv shm("TDIST_ALGO_GATHER", "shm");
    EXPECT_EQ(ForcedAlgorithms::from_environment().of(OpCode::Gather), ForcedAlgorithms::kNone);
  }
  ScopedEnv force("TDIST_ALGO_REDUCE_SCATTER", "spiral");
  const std::string direct = value_error_of([] { ForcedAlgorithms::from_environment(); }, "from_environment");
  EXPECT_TRUE(has(direct, "TDIST_ALGO_REDUCE_SCATTER=spiral") && has(direct, "ring, recursive_halving, shm")) << direct;
}

// docs/algorithms.md shows the tables the selector reads.
TEST(TuningTables, TheDocumentationShowsThem) {
  std::ifstream in(std::filesystem::path(TDIST_SOURCE_DIR) / "docs/algorithms.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str(), begin = "<!-- tuning: begin -->\n", end = "<!-- tuning: end -->";
  const auto b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/algorithms.md has no '" << begin << "' marker";
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), tuning_markdown())
      << "docs/algorithms.md is out of date: paste tuning_markdown() between the markers";
}

}  // namespace
}  // namespace tdist::testing
