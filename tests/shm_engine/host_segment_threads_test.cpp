// The arena's collectives with ranks as threads, for world sizes 1..8: every
// dtype and op, sizes 0, 1, odd, not divisible by the world size and larger
// than a slot (slots are shrunk to 4 KiB so that the chunked paths run on
// small data), every root, uneven splits; results compared bit for bit with a
// rank-order reduction computed locally. (A world of one has no arena: the
// transport's answer must agree.)
#include <cstring>
#include <initializer_list>
#include <numeric>

#include "shm_engine/host_segment_util.h"
#include "shm_engine/layout.h"

namespace tdist::testing {
namespace {

constexpr size_t kSlot = 4096;

class ArenaThreads : public ::testing::TestWithParam<int> {
 protected:
  ScopedEnv small_slots_{"TDIST_SHM_SLOT_BYTES", std::to_string(kSlot)};
};

// Waits for a call issued with async_op false, as a blocking free function
// does (it ran on the caller's thread when the group's queue was idle).
void blocking(const std::shared_ptr<Work>& work) { work->wait(); }

// Element counts: empty, one, odd, not divisible by n, several slots.
std::vector<size_t> counts(DType dt, int n) { return {0, 1, 7, 13 * static_cast<size_t>(n) + 1, 3 * kSlot / dtype_size(dt) + 5}; }
// The largest post of a rooted collective and one element more, which takes
// the slots (HostSegment: Posts).
std::vector<size_t> post_edges(DType dt) {
  return {shm_engine::kPostBytes / dtype_size(dt), shm_engine::kPostBytes / dtype_size(dt) + 1};
}

std::string where(DType dt, size_t count, int rank) {
  return std::string(dtype_name(dt)) + " x " + std::to_string(count) + " on rank " + std::to_string(rank);
}

// Elements [at, at + count) of b as a buffer of their own.
Buffer part(DType dt, Buffer& b, size_t at, size_t count) {
  Buffer out(dt, count);
  if (count) std::memcpy(out.data(), static_cast<char*>(b.data()) + at * dtype_size(dt), count * dtype_size(dt));
  return out;
}

TEST_P(ArenaThreads, AllReduceEveryDtypeOpAndSize) {
  const int n = GetParam();
  with_thread_world(n, [&](ProcessGroup& pg) {
    for (DType dt : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dt)) continue;
        for (size_t count : counts(dt, n)) {
          Buffer b = rank_buffer(dt, count, pg.rank());
          blocking(pg.all_reduce(b.tensor(), {.op = op, .async_op = false}));
          EXPECT_EQ(compare_exact(b, expected_reduction(dt, op, count, n)), "")
              << "all_reduce " << op.name() << " of " << where(dt, count, pg.rank());
        }
      }
  });
}

// Data above the one-round limit that fits one slot: on 2 ranks with a core
// each, both fold the whole of it in place (fold_two_in_place); otherwise the
// shares.
TEST_P(ArenaThreads, AllReduceOfOneSlotEveryDtypeAndOp) {
  const int n = GetParam();
  ScopedEnv one_round("TDIST_SHM_ONE_ROUND_BYTES", "256");
  with_thread_world(n, [&](ProcessGroup& pg) {
    for (DType dt : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dt)) continue;
        for (size_t count : {300 / dtype_size(dt) + 1, kSlot / dtype_size(dt)}) {
          Buffer b = rank_buffer(dt, count, pg.rank());
          blocking(pg.all_reduce(b.tensor(), {.op = op, .async_op = false}));
          EXPECT_EQ(compare_exact(b, expected_reduction(dt, op, count, n)), "")
              << "all_reduce " << op.name() << " of " << where(dt, count, pg.rank());
        }
      }
  });
}

// Data above a slot: on 2 ranks with a core each, in place or in shares as
// rank 0 picks (each way told, and AUTO, which runs both after its warm-up:
// each size class here sees dozens of calls); otherwise the shares.
TEST_P(ArenaThreads, AllReduceAboveASlotEachWayEveryDtypeAndOp) {
  const int n = GetParam();
  for (const char* way : {"IN_PLACE", "SHARES", "AUTO"}) {
    ScopedEnv told("TDIST_SHM_TWO_RANK_ALL_REDUCE", way);
    with_thread_world(n, [&](ProcessGroup& pg) {
      for (DType dt : all_dtypes())
        for (ReduceOp op : all_ops()) {
          if (!reduce_op_supported(op, dt)) continue;
          for (size_t count :
               {kSlot / dtype_size(dt) + 1, 2 * kSlot / dtype_size(dt), 5 * kSlot / dtype_size(dt) + 3}) {
            Buffer b = rank_buffer(dt, count, pg.rank());
            blocking(pg.all_reduce(b.tensor(), {.op = op, .async_op = false}));
            EXPECT_EQ(compare_exact(b, expected_reduction(dt, op, count, n)), "")
                << "all_reduce " << op.name() << " of " << where(dt, count, pg.rank()) << ", " << way;
          }
        }
    });
  }
}

TEST_P(ArenaThreads, ReduceEveryRootDtypeAndOp) {
  const int n = GetParam();
  with_thread_world(n, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    for (DType dt : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dt)) continue;
        std::vector<size_t> sizes = {1, 13 * static_cast<size_t>(n) + 1, 3 * kSlot / dtype_size(dt) + 5};
        for (size_t edge : post_edges(dt)) sizes.push_back(edge);
        for (size_t count : sizes)
          for (int root = 0; root < n; ++root) {
            Buffer b = rank_buffer(dt, count, me);
            blocking(pg.reduce(b.tensor(), {.root = root, .op = op, .async_op = false}));
            Buffer want = me == root ? expected_reduction(dt, op, count, n) : rank_buffer(dt, count, me);
            EXPECT_EQ(compare_exact(b, want), "")
                << "reduce " << op.name() << " to " << root << " of " << where(dt, count, me);
          }
      }
  });
}

TEST_P(ArenaThreads, BroadcastEveryRootAndSize) {
  const int n = GetParam();
  with_thread_world(n, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    for (DType dt : {DType::UInt8, DType::Float32, DType::Complex128}) {
      std::vector<size_t> sizes = counts(dt, n);
      sizes.push_back((2 * n * kSlot + 100) / dtype_size(dt));  // more than all slots of a round
      for (size_t edge : post_edges(dt)) sizes.push_back(edge);
      for (size_t count : sizes)
        for (int root = 0; root < n; ++root) {
          Buffer b = rank_buffer(dt, count, me == root ? root : 99);
          blocking(pg.broadcast(b.tensor(), {.root = root, .async_op = false}));
          EXPECT_EQ(compare_exact(b, rank_buffer(dt, count, root)), "")
              << "broadcast from " << root << " of " << where(dt, count, me);
        }
    }
  });
}

// With the default slots, a broadcast or reduce of a middle size is one piece
// that its writers stream into the segment (chunking.h: publish): every root,
// sizes whose ends are not whole cache lines, against the local result.
TEST_P(ArenaThreads, LoneMiddlePiecesStreamedEveryRoot) {
  ScopedEnv default_slots("TDIST_SHM_SLOT_BYTES", nullptr);
  const int n = GetParam();
  with_thread_world(n, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    const DType dt = DType::Float32;
    for (size_t count : {size_t{4099}, size_t{50001}})  // 16396 and 200004 bytes: 12 and 4 past whole lines
      for (int root = 0; root < n; ++root) {
        Buffer b = rank_buffer(dt, count, me == root ? root : 99);
        blocking(pg.broadcast(b.tensor(), {.root = root, .async_op = false}));
        EXPECT_EQ(compare_exact(b, rank_buffer(dt, count, root)), "")
            << "broadcast from " << root << " of " << where(dt, count, me);
        Buffer v = rank_buffer(dt, count, me);
        blocking(pg.reduce(v.tensor(), {.root = root, .op = ReduceOp::SUM, .async_op = false}));
        Buffer want = me == root ? expected_reduction(dt, ReduceOp::SUM, count, n) : rank_buffer(dt, count, me);
        EXPECT_EQ(compare_exact(v, want), "") << "reduce to " << root << " of " << where(dt, count, me);
      }
  });
}

void all_gather_cases(int n) {
  with_thread_world(n, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    for (DType dt : {DType::Int8, DType::Float64}) {
      const size_t per_slot = kSlot / dtype_size(dt);
      // Per-rank counts: even ones, then uneven ones with empty and multi-slot contributions.
      std::vector<std::function<size_t(int)>> layouts;
      for (size_t c : counts(dt, n)) layouts.push_back([c](int) { return c; });
      layouts.push_back([&](int r) { return r % 3 == 1 ? size_t{0} : static_cast<size_t>(r) * per_slot / 2 + 3; });
      for (auto& count_of : layouts) {
        std::vector<Buffer> outs;
        for (int q = 0; q < n; ++q) outs.emplace_back(dt, count_of(q));
        std::vector<Tensor> views;
        for (auto& o : outs) views.push_back(o.tensor());
        Buffer in = rank_buffer(dt, count_of(me), me);
        blocking(pg.all_gather(views, in.tensor(), {.async_op = false}));
        for (int q = 0; q < n; ++q)
          EXPECT_EQ(compare_exact(outs[q], rank_buffer(dt, count_of(q), q)), "")
              << "all_gather block " << q << ", " << where(dt, count_of(q), me);
      }
      for (size_t c : counts(dt, n)) {
        for (bool in_place : {false, true}) {
          Buffer out(dt, c * n);
          Buffer in = rank_buffer(dt, c, me);
          Tensor input = in.tensor();
          if (in_place) {
            input = out.tensor().slice(static_cast<int64_t>(c) * me, static_cast<int64_t>(c));
            if (c) std::memcpy(input.data(), in.data(), in.nbytes());
          }
          blocking(pg.all_gather_into_tensor(out.tensor(), input, {.async_op = false}));
          for (int q = 0; q < n; ++q)
            EXPECT_EQ(compare_exact(part(dt, out, c * q, c), rank_buffer(dt, c, q)), "")
                << "all_gather_into_tensor" << (in_place ? " in place" : "") << " block " << q << ", "
                << where(dt, c, me);
        }
      }
    }
  });
}

// How blocks travel (HostSegment: one copy): through the segment; read
// straight from their owner's memory (the "ranks" share a process here, which
// the kernel's reads allow too; all_gather does so only with no more ranks
// than cores, n = 2 on a 2-core machine, all_to_all at every size of group);
// or with reads that fail on every rank, so that the first such call falls
// back to the segment, and so do the later ones. With a core for each rank
// (HostSegment::all_gather_blocks, all_to_all_blocks), rank 0 may also pick
// the segment for the blocks meant for one copy (SegmentPicked), or time both
// ways (Timed: each runs after the warm-up's calls).
enum class Copies { ThroughSegment, OneCopy, OneCopyRefused, SegmentPicked, Timed };
void under(Copies how, const std::function<void()>& cases) {
  ScopedEnv bytes("TDIST_SHM_SINGLE_COPY_BYTES", how == Copies::ThroughSegment ? "0" : "1");
  ScopedEnv refused("TDIST_TEST_SHM_SINGLE_COPY_FAIL", how == Copies::OneCopyRefused ? "1" : "0");
  ScopedEnv large("TDIST_SHM_LARGE_BLOCKS", how == Copies::SegmentPicked ? "SEGMENT"
                                            : how == Copies::Timed       ? "AUTO"
                                                                         : "ONE_COPY");
  cases();
}

TEST_P(ArenaThreads, AllGatherEvenUnevenAndIntoTensor) {
  under(Copies::ThroughSegment, [&] { all_gather_cases(GetParam()); });
}
TEST_P(ArenaThreads, AllGatherInOneCopyEvenUnevenAndIntoTensor) {
  under(Copies::OneCopy, [&] { all_gather_cases(GetParam()); });
}
TEST_P(ArenaThreads, AllGatherWhoseReadsFailCopiesThroughTheSegment) {
  under(Copies::OneCopyRefused, [&] { all_gather_cases(GetParam()); });
}
TEST_P(ArenaThreads, AllGatherOfBlocksForOneCopyThatRankZeroSendsThroughTheSegment) {
  under(Copies::SegmentPicked, [&] { all_gather_cases(GetParam()); });
}
// The same all_gather or all_to_all (blocks of a few slots) this many times:
// past MeasuredChoice's warm-up, so that a timed choice runs both ways.
constexpr int kTimedCalls = 16;

TEST_P(ArenaThreads, AllGatherOfBlocksForOneCopyEitherWayAsRankZeroTimesThem) {
  under(Copies::Timed, [&] {
    with_thread_world(GetParam(), [&](ProcessGroup& pg) {
      const int n = pg.size(), me = pg.rank();
      const size_t count = 3 * kSlot / sizeof(int32_t) + 5;
      for (int call = 0; call < kTimedCalls; ++call) {
        Buffer out(DType::Int32, count * n);
        Buffer in = rank_buffer(DType::Int32, count, me + call);
        blocking(pg.all_gather_into_tensor(out.tensor(), in.tensor(), {.async_op = false}));
        for (int q = 0; q < n; ++q)
          EXPECT_EQ(
              compare_exact(part(DType::Int32, out, count * q, count), rank_buffer(DType::Int32, count, q + call)), "")
              << "all_gather #" << call << " block " << q << " on rank " << me;
      }
    });
  });
}

void all_to_all_cases(int n) {
  with_thread_world(n, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    for (DType dt : {DType::Int32, DType::Float64})
      for (size_t extra : {size_t{0}, size_t{300}}) {  // 300 rows of 3: many parts' worth
        // rows(src, dst) rows of 3 elements go from src to dst; element k of
        // that block is value(src, dst, k).
        auto rows = [&](int s, int d) { return static_cast<size_t>((s + 2 * d) % 4) + extra; };
        auto value = [](int s, int d, size_t k) { return static_cast<long>((s * 31 + d * 7 + k) % 1000); };
        std::vector<int64_t> in_splits(n), out_splits(n);
        size_t in_rows = 0, out_rows = 0;
        for (int q = 0; q < n; ++q) {
          in_splits[q] = static_cast<int64_t>(rows(me, q));
          out_splits[q] = static_cast<int64_t>(rows(q, me));
          in_rows += rows(me, q);
          out_rows += rows(q, me);
        }
        Buffer in(dt, in_rows * 3), out(dt, out_rows * 3), want(dt, out_rows * 3);
        for (int q = 0, at = 0; q < n; at += static_cast<int>(rows(me, q) * 3), ++q)
          for (size_t k = 0; k < rows(me, q) * 3; ++k) in.set(at + k, value(me, q, k));
        for (int q = 0, at = 0; q < n; at += static_cast<int>(rows(q, me) * 3), ++q)
          for (size_t k = 0; k < rows(q, me) * 3; ++k) want.set(at + k, value(q, me, k));
        Tensor input(in.data(), dt, {static_cast<int64_t>(in_rows), 3});
        Tensor output(out.data(), dt, {static_cast<int64_t>(out_rows), 3});
        blocking(pg.all_to_all_single(
            output, input, {.output_split_sizes = out_splits, .input_split_sizes = in_splits, .async_op = false}));
        EXPECT_EQ(compare_exact(out, want), "") << "all_to_all_single " << where(dt, out_rows * 3, me);

        // The list form, over the same blocks.
        std::vector<Tensor> ins, outs;
        for (int64_t q = 0, a = 0, b = 0; q < n; a += in_splits[q] * 3, b += out_splits[q] * 3, ++q) {
          ins.push_back(in.tensor().slice(a, in_splits[q] * 3));
          outs.push_back(out.tensor().slice(b, out_splits[q] * 3));
        }
        std::memset(out.data(), 0, out.nbytes());
        blocking(pg.all_to_all(outs, ins, {.async_op = false}));
        EXPECT_EQ(compare_exact(out, want), "") << "all_to_all " << where(dt, out_rows * 3, me);
      }
  });
}

// Blocks of exactly one, two and three parts of a slot (a slot holds one part
// per destination, kSlot / n bytes in whole lines), and an element either side:
// the edges where a block takes one round more or less. `parts` in the order
// given: the world's first call is the one whose reads fail first.
void all_to_all_part_edges(int n, std::initializer_list<size_t> part_counts = {1, 2, 3}) {
  with_thread_world(n, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    const size_t part = kSlot / static_cast<size_t>(n) / 64 * 64;
    for (size_t parts : part_counts)
      for (int delta : {-1, 0, 1}) {
        const size_t block = parts * part / sizeof(int32_t) + static_cast<size_t>(delta);
        Buffer in(DType::Int32, block * n), out(DType::Int32, block * n), want(DType::Int32, block * n);
        for (int q = 0; q < n; ++q)
          for (size_t k = 0; k < block; ++k) {
            in.set(q * block + k, static_cast<long>((me * 131 + q * 17 + k) % 100000));
            want.set(q * block + k, static_cast<long>((q * 131 + me * 17 + k) % 100000));
          }
        blocking(pg.all_to_all_single(out.tensor(), in.tensor(), AllToAllOptions{.async_op = false}));
        EXPECT_EQ(compare_exact(out, want), "") << "blocks of " << parts << " parts " << std::showpos << delta
                                                << " elements on rank " << std::noshowpos << me;
      }
  });
}

TEST_P(ArenaThreads, AllToAllUnevenSplitsAndLists) {
  under(Copies::ThroughSegment, [&] {
    all_to_all_cases(GetParam());
    all_to_all_part_edges(GetParam());
  });
}
TEST_P(ArenaThreads, AllToAllInOneCopyUnevenSplitsAndLists) {
  under(Copies::OneCopy, [&] {
    all_to_all_cases(GetParam());
    all_to_all_part_edges(GetParam());
  });
}
TEST_P(ArenaThreads, AllToAllWhoseReadsFailCopiesThroughTheSegment) {
  under(Copies::OneCopyRefused, [&] { all_to_all_cases(GetParam()); });
}
TEST_P(ArenaThreads, AllToAllOfBlocksForOneCopyThatRankZeroSendsThroughTheSegment) {
  under(Copies::SegmentPicked, [&] {
    all_to_all_cases(GetParam());
    all_to_all_part_edges(GetParam());
  });
}
TEST_P(ArenaThreads, AllToAllOfBlocksForOneCopyEitherWayAsRankZeroTimesThem) {
  under(Copies::Timed, [&] {
    all_to_all_cases(GetParam());
    with_thread_world(GetParam(), [&](ProcessGroup& pg) {
      const int n = pg.size(), me = pg.rank();
      const size_t block = 3 * kSlot / sizeof(int32_t) + 5;
      for (int call = 0; call < kTimedCalls; ++call) {
        Buffer in(DType::Int32, block * n), out(DType::Int32, block * n), want(DType::Int32, block * n);
        for (int q = 0; q < n; ++q)
          for (size_t k = 0; k < block; ++k) {
            in.set(q * block + k, static_cast<long>((me * 131 + q * 17 + k + call) % 100000));
            want.set(q * block + k, static_cast<long>((q * 131 + me * 17 + k + call) % 100000));
          }
        blocking(pg.all_to_all_single(out.tensor(), in.tensor(), AllToAllOptions{.async_op = false}));
        EXPECT_EQ(compare_exact(out, want), "") << "all_to_all #" << call << " on rank " << me;
      }
    });
  });
}
// The first call's blocks (three parts and one element) are read in one copy
// with a core per rank; the reads fail, and they go through the segment in
// four rounds after the others' blocks.
TEST_P(ArenaThreads, AllToAllOfLargeBlocksWhoseReadsFailCopiesThroughTheSegment) {
  under(Copies::OneCopyRefused, [&] { all_to_all_part_edges(GetParam(), {3, 2, 1}); });
}

TEST_P(ArenaThreads, GatherAndScatterEveryRoot) {
  const int n = GetParam();
  with_thread_world(n, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    const DType dt = DType::Int16;
    std::vector<size_t> sizes = counts(dt, n);
    for (size_t edge : post_edges(dt)) sizes.push_back(edge);
    for (size_t c : sizes)
      for (int root = 0; root < n; ++root) {
        std::vector<Buffer> gathered;
        std::vector<Tensor> views;
        if (me == root)
          for (int q = 0; q < n; ++q) {
            gathered.emplace_back(dt, c);
            views.push_back(gathered.back().tensor());
          }
        Buffer in = rank_buffer(dt, c, me);
        blocking(pg.gather(views, in.tensor(), {.root = root, .async_op = false}));
        for (int q = 0; q < static_cast<int>(gathered.size()); ++q)
          EXPECT_EQ(compare_exact(gathered[q], rank_buffer(dt, c, q)), "")
              << "gather to " << root << " block " << q << ", " << where(dt, c, me);

        // scatter: the root sends block q = rank_buffer(q + 10) to rank q.
        std::vector<Buffer> blocks;
        std::vector<Tensor> sources;
        if (me == root)
          for (int q = 0; q < n; ++q) {
            blocks.push_back(rank_buffer(dt, c, q + 10));
            sources.push_back(blocks.back().tensor());
          }
        Buffer out(dt, c);
        blocking(pg.scatter(out.tensor(), sources, {.root = root, .async_op = false}));
        EXPECT_EQ(compare_exact(out, rank_buffer(dt, c, me + 10)), "")
            << "scatter from " << root << ", " << where(dt, c, me);
      }
  });
}

// Several collectives in flight at once (queued, run by the group's thread in
// issue order), then waited for; then the same issued as blocking calls.
TEST_P(ArenaThreads, AsyncCollectivesInFlightTogether) {
  const int n = GetParam();
  with_thread_world(n, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    const DType dt = DType::Float32;
    const size_t c = 2 * kSlot / 4 + 3;
    for (bool queued : {true, false}) {
      Buffer sum = rank_buffer(dt, c, me), bcast = rank_buffer(dt, c, me), gathered(dt, c * n);
      Buffer mine = rank_buffer(dt, c, me), scattered(dt, c), big = rank_buffer(dt, c * n, me);
      std::vector<std::shared_ptr<Work>> works;
      const bool async = queued;
      works.push_back(pg.all_reduce(sum.tensor(), {.op = ReduceOp::SUM, .async_op = async}));
      works.push_back(pg.broadcast(bcast.tensor(), {.root = n - 1, .async_op = async}));
      works.push_back(pg.barrier({.async_op = async}));
      works.push_back(pg.all_gather_into_tensor(gathered.tensor(), mine.tensor(), {.async_op = async}));
      works.push_back(pg.reduce_scatter_tensor(scattered.tensor(), big.tensor(), {.op = ReduceOp::MAX, .async_op = async}));
      for (auto& w : works) w->wait();
      EXPECT_EQ(compare_exact(sum, expected_reduction(dt, ReduceOp::SUM, c, n)), "");
      EXPECT_EQ(compare_exact(bcast, rank_buffer(dt, c, n - 1)), "");
      for (int q = 0; q < n; ++q) EXPECT_EQ(compare_exact(part(dt, gathered, c * q, c), rank_buffer(dt, c, q)), "");
      Buffer all = expected_reduction(dt, ReduceOp::MAX, c * n, n);
      EXPECT_EQ(compare_exact(scattered, part(dt, all, c * me, c)), "");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ArenaThreads, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace tdist::testing
