// The arena across real processes (each maps the segment on its own): the
// collectives of the default group and of subgroups, a rank killed while the
// others wait for it in shared memory, TDIST_SHM=0, and /dev/shm left clean.
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <thread>

#include "shm_engine/host_segment_util.h"
#include "backends/process_world.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

struct Pids {
  std::atomic<pid_t> pid[8];
};

// Every child's pid, for looking at /dev/shm after they are gone.
void expect_no_names_left(Pids& pids, int n) {
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(arena_names_of(pids.pid[r].load()), std::vector<std::string>{}) << "rank " << r;
}

TEST(ArenaProcesses, CollectivesOfTheWorldAndOfSubgroups) {
  constexpr int n = 4;
  Shared<PortBoard> board;
  Shared<Pids> pids;
  auto results = run_in_processes(n, [&](int me) {
    pids->pid[me].store(getpid());
    init_process_world(*board, me, n, milliseconds(30000));
    require(maps_an_arena(), "rank " + std::to_string(me) + " maps no arena");
    // all_reduce: one-round sizes and chunked ones (more than a 1 MiB slot).
    for (size_t count : {size_t{1}, size_t{13}, size_t{5000}, size_t{700001}}) {
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX}) {
        Buffer b = rank_buffer(DType::Float32, count, me);
        all_reduce(b.tensor(), op);
        require(compare_exact(b, expected_reduction(DType::Float32, op, count, n)).empty(),
                "all_reduce of " + std::to_string(count) + ": " +
                    compare_exact(b, expected_reduction(DType::Float32, op, count, n)));
      }
    }
    // broadcast from the last rank, more than all slots of a round.
    Buffer b = rank_buffer(DType::Int64, 700001, me);
    broadcast(b.tensor(), n - 1);
    require(compare_exact(b, rank_buffer(DType::Int64, 700001, n - 1)).empty(), "broadcast");
    // all_gather with a different size per rank, one of them empty.
    auto count_of = [](int r) { return r == 1 ? size_t{0} : static_cast<size_t>(r) * 200000 + 7; };
    std::vector<Buffer> outs;
    std::vector<Tensor> views;
    for (int q = 0; q < n; ++q) outs.emplace_back(DType::UInt8, count_of(q));
    for (auto& o : outs) views.push_back(o.tensor());
    Buffer in = rank_buffer(DType::UInt8, count_of(me), me);
    all_gather(views, in.tensor());
    for (int q = 0; q < n; ++q)
      require(compare_exact(outs[q], rank_buffer(DType::UInt8, count_of(q), q)).empty(), "all_gather block " + std::to_string(q));

    // A subgroup of two (its own arena) and one of everyone, used in turns.
    Group pair = new_group({1, 3});
    Group all = new_group({});
    for (int k = 0; k < 3; ++k) {
      std::vector<int32_t> v(100, me);
      if (me == 1 || me == 3) {
        all_reduce(v, ReduceOp::SUM, pair);
        require(v[99] == 4, "subgroup all_reduce");
      }
      std::vector<int32_t> w(1000, me), gathered(1000 * n);
      all_gather_into_tensor(gathered, w, all);
      for (int q = 0; q < n; ++q) require(gathered[1000 * q + 999] == q, "all_gather_into_tensor");
    }
    destroy_process_group(pair);
    destroy_process_group(all);
    destroy_process_group();
    require(arena_names_of(getpid()).empty(), "arena names left in /dev/shm");
  });
  EXPECT_EQ(describe_failures(results), "");
  expect_no_names_left(*pids, n);
}

// One rank cannot read the others' memory (as where the kernel refuses it):
// the group agrees at its first large all_gather, whose data then goes
// through the segment, as every later one's does; results stay exact.
TEST(ArenaProcesses, ARankThatCannotReadTheOthersMakesTheGroupCopyThroughTheSegment) {
  constexpr int n = 2;  // no more ranks than a 2-core machine has cores: all_gather then reads in place
  Shared<PortBoard> board;
  auto results = run_in_processes(n, [&](int me) {
    if (me == 1) setenv("TDIST_TEST_SHM_SINGLE_COPY_FAIL", "1", 1);
    setenv("TDIST_SHM_LARGE_BLOCKS", "ONE_COPY", 1);
    init_process_world(*board, me, n, milliseconds(30000));
    require(maps_an_arena(), "rank " + std::to_string(me) + " maps no arena");
    for (int k = 0; k < 3; ++k) {
      // Blocks of about 160 KB: at least TDIST_SHM_SINGLE_COPY_BYTES, below its _MAX_BYTES (defaults).
      const size_t count = 40000 + static_cast<size_t>(k);
      std::vector<Buffer> outs;
      std::vector<Tensor> views;
      for (int q = 0; q < n; ++q) outs.emplace_back(DType::Int32, count);
      for (auto& o : outs) views.push_back(o.tensor());
      Buffer in = rank_buffer(DType::Int32, count, me);
      all_gather(views, in.tensor());
      for (int q = 0; q < n; ++q)
        require(compare_exact(outs[q], rank_buffer(DType::Int32, count, q)).empty(),
                "all_gather " + std::to_string(k) + " block " + std::to_string(q));
    }
    destroy_process_group();
  });
  EXPECT_EQ(describe_failures(results), "");
}

// all_to_all between two processes (a core each on a 2-core machine): blocks
// of TDIST_SHM_SINGLE_COPY_BYTES and more are read from the other process's
// input in one copy, smaller ones go through the segment, in one call. With
// `refused`, rank 1 cannot read: the first call moves the large blocks
// through the segment after all, and so do the later ones. `told`: each
// rank's TDIST_SHM_LARGE_BLOCKS, of which rank 0's decides (a rank that went
// its own way would break the results, or wait for a round the other never
// enters).
void all_to_all_between_processes(bool refused, std::array<const char*, 2> told = {"ONE_COPY", "ONE_COPY"},
                                  int calls = 3) {
  constexpr int n = 2;
  Shared<PortBoard> board;
  auto results = run_in_processes(n, [&](int me) {
    if (refused && me == 1) setenv("TDIST_TEST_SHM_SINGLE_COPY_FAIL", "1", 1);
    setenv("TDIST_SHM_LARGE_BLOCKS", told[me], 1);
    init_process_world(*board, me, n, milliseconds(30000));
    require(maps_an_arena(), "rank " + std::to_string(me) + " maps no arena");
    // rows(s, d) int32 rows of 4 go from s to d: 0 -> 1 about 2 MB (several slots), 1 -> 0 400 bytes.
    auto rows = [](int s, int d, int k) -> int64_t { return s == d ? 3 : s == 0 ? 130001 + k : 25; };
    auto value = [](int s, int d, int64_t i) { return static_cast<long>((s * 7919 + d * 104729 + i) % 1000003); };
    for (int k = 0; k < calls; ++k) {
      std::vector<int64_t> in_splits(n), out_splits(n);
      int64_t in_rows = 0, out_rows = 0;
      for (int q = 0; q < n; ++q) {
        in_rows += in_splits[q] = rows(me, q, k);
        out_rows += out_splits[q] = rows(q, me, k);
      }
      Buffer in(DType::Int32, static_cast<size_t>(in_rows) * 4), out(DType::Int32, static_cast<size_t>(out_rows) * 4);
      Buffer want(DType::Int32, static_cast<size_t>(out_rows) * 4);
      for (int q = 0, at = 0, got = 0; q < n;
           at += static_cast<int>(in_splits[q] * 4), got += static_cast<int>(out_splits[q] * 4), ++q) {
        for (int64_t i = 0; i < in_splits[q] * 4; ++i) in.set(at + i, value(me, q, i));
        for (int64_t i = 0; i < out_splits[q] * 4; ++i) want.set(got + i, value(q, me, i));
      }
      all_to_all_single(Tensor(out.data(), DType::Int32, {out_rows, 4}), Tensor(in.data(), DType::Int32, {in_rows, 4}),
                        out_splits, in_splits);
      require(compare_exact(out, want).empty(), "all_to_all_single " + std::to_string(k) + " on rank " +
                                                    std::to_string(me) + ": " + compare_exact(out, want));
    }
    destroy_process_group();
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(ArenaProcesses, AllToAllReadsLargeBlocksFromTheOtherProcess) { all_to_all_between_processes(false); }
TEST(ArenaProcesses, AllToAllWhoseReadsAreRefusedMovesLargeBlocksThroughTheSegment) {
  all_to_all_between_processes(true);
}
TEST(ArenaProcesses, AllToAllMovesLargeBlocksTheWayRankZeroPicks) {
  all_to_all_between_processes(false, {"SEGMENT", "ONE_COPY"});
  all_to_all_between_processes(false, {"ONE_COPY", "SEGMENT"});
  all_to_all_between_processes(false, {"AUTO", "SEGMENT"}, 16);  // past the warm-up: both ways
}

// reduce between two processes with a core each (the root folds both; the
// other rank streams its chunks into its slot and leaves after the last):
// several slots, either root, results bit for bit; the other rank's tensor
// is left as it was. all_reduce the same way up to a slot.
TEST(ArenaProcesses, ReduceAndAllReduceOfTwoProcessesFoldedInPlace) {
  constexpr int n = 2;
  Shared<PortBoard> board;
  auto results = run_in_processes(n, [&](int me) {
    init_process_world(*board, me, n, milliseconds(30000));
    require(maps_an_arena(), "rank " + std::to_string(me) + " maps no arena");
    for (size_t count : {size_t{20000}, size_t{700001}})
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MIN})
        for (int root = 0; root < n; ++root) {
          Buffer b = rank_buffer(DType::Float32, count, me);
          reduce(b.tensor(), root, op);
          Buffer want =
              me == root ? expected_reduction(DType::Float32, op, count, n) : rank_buffer(DType::Float32, count, me);
          require(compare_exact(b, want).empty(), "reduce " + std::string(op.name()) + " of " + std::to_string(count) +
                                                      " to " + std::to_string(root) + ": " + compare_exact(b, want));
        }
    // all_reduce of up to a slot takes the same path on both ranks; above, the way rank 0 picks.
    for (size_t count : {size_t{20000}, size_t{131072}, size_t{700001}})
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX}) {
        Buffer b = rank_buffer(DType::Float32, count, me);
        all_reduce(b.tensor(), op);
        const Buffer want = expected_reduction(DType::Float32, op, count, n);
        require(compare_exact(b, want).empty(), "all_reduce " + std::string(op.name()) + " of " +
                                                    std::to_string(count) + ": " + compare_exact(b, want));
      }
    destroy_process_group();
  });
  EXPECT_EQ(describe_failures(results), "");
}

// Above a slot, 2 ranks with a core each run an all_reduce in place or in
// shares as rank 0 picks: here the two processes are told different ways, so
// a rank that ran its own would break the result (or wait for a round the
// other never enters, until the timeout). AUTO runs each way after its
// warm-up (MeasuredChoice::kWarmUpCalls), then the faster.
TEST(ArenaProcesses, AllReduceAboveASlotOfTwoProcessesRunsTheWayRankZeroPicks) {
  constexpr int n = 2;
  const char* ways[][2] = {{"IN_PLACE", "SHARES"}, {"SHARES", "IN_PLACE"}, {"AUTO", "SHARES"}, {"AUTO", "AUTO"}};
  for (auto& way : ways) {
    Shared<PortBoard> board;
    auto results = run_in_processes(n, [&](int me) {
      setenv("TDIST_SHM_TWO_RANK_ALL_REDUCE", way[me], 1);
      init_process_world(*board, me, n, milliseconds(30000));
      require(maps_an_arena(), "rank " + std::to_string(me) + " maps no arena");
      for (int call = 0; call < 16; ++call)
        for (size_t count : {size_t{131073}, size_t{700001}}) {
          const ReduceOp op = call % 2 ? ReduceOp::AVG : ReduceOp::SUM;
          Buffer b = rank_buffer(DType::Float32, count, me);
          all_reduce(b.tensor(), op);
          const Buffer want = expected_reduction(DType::Float32, op, count, n);
          require(compare_exact(b, want).empty(), "all_reduce " + std::string(op.name()) + " #" + std::to_string(call) +
                                                      " of " + std::to_string(count) + " with rank 0 told " + way[0] +
                                                      ", rank 1 " + way[1] + ": " + compare_exact(b, want));
        }
      destroy_process_group();
    });
    EXPECT_EQ(describe_failures(results), "") << "rank 0 told " << way[0] << ", rank 1 " << way[1];
  }
}

TEST(ArenaProcesses, RankKilledWhileOthersWaitInSharedMemoryIsNamed) {
  constexpr int n = 3;
  Shared<PortBoard> board;
  Shared<std::atomic<int>> waiting;
  auto results = run_in_processes(n, [&](int me) {
    // A long timeout: the survivors must learn of the death from the lost
    // connection, not from their deadline.
    init_process_world(*board, me, n, milliseconds(60000));
    std::vector<float> v(600000, 1.0f);  // more than a slot: several rounds
    all_reduce(v);
    require(v[0] == 3.0f, "first all_reduce");
    if (me == 2) {
      // Die once the others are (very likely) inside all_reduce #2.
      for (int i = 0; i < 2000 && waiting->load() < 2; ++i) std::this_thread::sleep_for(milliseconds(1));
      std::this_thread::sleep_for(milliseconds(50));
      raise(SIGKILL);
    }
    try {
      waiting->fetch_add(1);
      all_reduce(v);
      require(false, "all_reduce #2 succeeded without rank 2");
    } catch (const DistBackendError& e) {
      std::string m = e.what();
      std::fprintf(stderr, "[rank %d] got, as expected: %s\n", me, m.c_str());
      require(contains(m, "all_reduce #2") && contains(m, "shared-memory"), "not the arena's all_reduce #2: " + m);
      require(contains(m, "rank 2"), "the dead rank 2 is not named: " + m);
      require(!contains(m, "Timed out"), "found by the deadline, not by the lost connection: " + m);
    }
  });
  EXPECT_TRUE(results[0].ok()) << results[0].describe();
  EXPECT_TRUE(results[1].ok()) << results[1].describe();
  EXPECT_EQ(results[2].signal, SIGKILL) << results[2].describe();
}

TEST(ArenaProcesses, ShmOffMakesNoArena) {
  constexpr int n = 2;
  Shared<PortBoard> board;
  Shared<Pids> pids;
  auto results = run_in_processes(n, [&](int me) {
    pids->pid[me].store(getpid());
    setenv("TDIST_SHM", "0", 1);
    init_process_world(*board, me, n, milliseconds(30000));
    require(!maps_an_arena(), "an arena is mapped with TDIST_SHM=0");
    require(arena_names_of(getpid()).empty(), "an arena segment exists with TDIST_SHM=0");
    std::vector<double> v(1000, me + 1.0);
    all_reduce(v);
    require(v[999] == 3.0, "all_reduce over the transport");
    destroy_process_group();
  });
  EXPECT_EQ(describe_failures(results), "");
  expect_no_names_left(*pids, n);
}

}  // namespace
}  // namespace tdist::testing
