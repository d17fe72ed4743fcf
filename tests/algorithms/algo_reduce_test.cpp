// Every algorithm of the reducing collectives (all_reduce, reduce,
// reduce_scatter) forced by name over every world size, op x dtype, edge
// sizes and large pipelined sizes, against reductions computed locally; and
// all_reduce results bitwise identical on every rank.
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "algorithms/algo_test_util.h"

namespace tdist::testing {
namespace {

// --- all_reduce --------------------------------------------------------------

void check_all_reduce(ProcessGroup& pg, ReduceOp op, DType dtype, size_t count, const std::string& label) {
  auto input = [&](int r, size_t i) { return reduce_input(op, r, i); };
  Buffer buf(dtype, count, [&](size_t i) { return input(pg.rank(), i); });
  pg.all_reduce(buf.tensor(), op)->wait();
  require_same(buf, reference_reduction(op, dtype, count, pg.size(), input),
               describe("all_reduce", dtype, count, pg.size(), std::string(op.name()) + " " + label));
}

class AllReduceAlgo : public ForcedAlgorithm {};

// Every op x dtype pair at an odd size below 8 ranks; every edge size for a few.
TEST_P(AllReduceAlgo, EveryOpDtypeAndEdgeSize) {
  ScopedEnv force("TDIST_ALGO_ALL_REDUCE", algorithm());
  with_thread_world(world(), [&](ProcessGroup& pg) {
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops())
        if (reduce_op_supported(op, dtype)) check_all_reduce(pg, op, dtype, 7, label());
    for (size_t count : edge_sizes()) {
      check_all_reduce(pg, ReduceOp::SUM, DType::Float32, count, label());
      check_all_reduce(pg, ReduceOp::AVG, DType::Int8, count, label());
      check_all_reduce(pg, ReduceOp::PRODUCT, DType::Complex128, count, label());
    }
  });
}

TEST_P(AllReduceAlgo, LargeInManySegments) {
  ScopedEnv force("TDIST_ALGO_ALL_REDUCE", algorithm()), segments("TDIST_ALGO_SEGMENT_BYTES", kSmallSegments);
  with_thread_world(world(), [&](ProcessGroup& pg) {
    check_all_reduce(pg, ReduceOp::SUM, DType::Float32, kLargeCount, label("small segments"));
    check_all_reduce(pg, ReduceOp::MAX, DType::Int8, kLargeCount + 5, label("small segments"));
    check_all_reduce(pg, ReduceOp::AVG, DType::BFloat16, kLargeCount / 4, label("small segments"));
  });
}


// Values whose sums round differently in different orders, with NaNs of two
// payloads and signed zeros: a rank that reduced in another operand order
// would end with other bits.
void fill_awkward(std::vector<float>& v, int rank) {
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t h = static_cast<uint32_t>(i * 2654435761u) ^ static_cast<uint32_t>(rank * 40503u);
    v[i] = std::ldexp(1.0f + static_cast<float>(h % 9973) / 9973.0f, static_cast<int>(h % 41) - 20) *
           ((h >> 7) % 2 ? 1.0f : -1.0f);
    if (i % 97 == 5) v[i] = rank % 2 ? 0.0f : -0.0f;
  }
  uint32_t nan_a = 0x7fc00001u + static_cast<uint32_t>(rank), nan_b = 0xffc00100u;
  if (v.size() > 11) std::memcpy(&v[11], &nan_a, 4);
  if (v.size() > 12 && rank % 2) std::memcpy(&v[12], &nan_b, 4);
}

TEST_P(AllReduceAlgo, EveryRankGetsBitwiseIdenticalFloats) {
  ScopedEnv force("TDIST_ALGO_ALL_REDUCE", algorithm()), segments("TDIST_ALGO_SEGMENT_BYTES", kSmallSegments);
  const int n = world();
  for (ReduceOp op : {ReduceOp(ReduceOp::SUM), ReduceOp(ReduceOp::MAX), ReduceOp(ReduceOp::MIN),
                      ReduceOp(ReduceOp::AVG)})
    for (size_t count : {size_t{1031}, size_t{70001}}) {
      std::vector<std::vector<float>> results(n);
      with_thread_world(n, [&](ProcessGroup& pg) {
        std::vector<float> v(count);
        fill_awkward(v, pg.rank());
        pg.all_reduce(v, op)->wait();
        results[pg.rank()] = std::move(v);
      });
      for (int r = 1; r < n; ++r)
        ASSERT_EQ(std::memcmp(results[r].data(), results[0].data(), count * sizeof(float)), 0)
            << algorithm() << " " << op.name() << " x" << count << ": rank " << r << " differs from rank 0";
    }
}

INSTANTIATE_TEST_SUITE_P(Forced, AllReduceAlgo, algo_params({"recursive_doubling", "rabenseifner", "ring"}),
                         algo_param_name);

// The ring with its default segments (the large test above uses small ones).
class RingAllReduce : public ::testing::TestWithParam<int> {};

TEST_P(RingAllReduce, LargeWithDefaultSegments) {
  ScopedEnv force("TDIST_ALGO_ALL_REDUCE", "ring");
  with_thread_world(GetParam(), [&](ProcessGroup& pg) {
    check_all_reduce(pg, ReduceOp::SUM, DType::Float32, 3 * kLargeCount, "ring");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingAllReduce, ::testing::ValuesIn(world_sizes()), world_name);

// --- reduce ------------------------------------------------------------------

void check_reduce(ProcessGroup& pg, int root, ReduceOp op, DType dtype, size_t count, const std::string& label) {
  const int me = pg.rank();
  auto input = [&](int r, size_t i) { return reduce_input(op, r, i, root); };
  Buffer buf(dtype, count, [&](size_t i) { return input(me, i); });
  Buffer before(dtype, count, [&](size_t i) { return input(me, i); });
  pg.reduce(buf.tensor(), root, op)->wait();
  std::string what = describe("reduce", dtype, count, pg.size(),
                              std::string(op.name()) + " root " + std::to_string(root) + " " + label);
  if (me == root)
    require_same(buf, reference_reduction(op, dtype, count, pg.size(), input), what);
  else
    require(buf.same_bytes(before), what + ": a non-root tensor was modified");
}

class ReduceAlgo : public ForcedAlgorithm {};

// Every op x dtype pair, the root moving through the ranks; every root with
// the edge sizes.
TEST_P(ReduceAlgo, EveryRootOpDtypeAndEdgeSize) {
  ScopedEnv force("TDIST_ALGO_REDUCE", algorithm());
  with_thread_world(world(), [&](ProcessGroup& pg) {
    const int n = pg.size();
    int k = 0;
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops())
        if (reduce_op_supported(op, dtype)) check_reduce(pg, k++ % n, op, dtype, 7, label());
    for (int root = 0; root < n; ++root)
      for (size_t count : edge_sizes()) {
        check_reduce(pg, root, ReduceOp::SUM, DType::Float32, count, label());
        check_reduce(pg, root, ReduceOp::AVG, DType::Int64, count, label());
      }
  });
}

TEST_P(ReduceAlgo, LargeEveryRoot) {
  ScopedEnv force("TDIST_ALGO_REDUCE", algorithm());
  with_thread_world(world(), [&](ProcessGroup& pg) {
    for (int root = 0; root < pg.size(); ++root)
      check_reduce(pg, root, root % 2 ? ReduceOp(ReduceOp::MIN) : ReduceOp(ReduceOp::SUM),
                   root % 2 ? DType::Float16 : DType::Float32, kLargeCount, label());
  });
}

TEST_P(ReduceAlgo, LargeInManySegments) {
  ScopedEnv force("TDIST_ALGO_REDUCE", algorithm()), segments("TDIST_ALGO_SEGMENT_BYTES", kSmallSegments);
  with_thread_world(world(), [&](ProcessGroup& pg) {
    const int n = pg.size();
    check_reduce(pg, n - 1, ReduceOp::SUM, DType::Float32, kLargeCount, label("small segments"));
    check_reduce(pg, n / 2, ReduceOp::MAX, DType::Int8, kLargeCount + 5, label("small segments"));
    check_reduce(pg, 0, ReduceOp::AVG, DType::BFloat16, kLargeCount / 4, label("small segments"));
  });
}

INSTANTIATE_TEST_SUITE_P(Forced, ReduceAlgo, algo_params({"binomial", "rabenseifner", "chain"}), algo_param_name);

// --- reduce_scatter ----------------------------------------------------------

// rank `from`'s contribution to element i of rank `block`'s output.
long rs_input(ReduceOp op, int from, int block, size_t i) { return reduce_input(op, from, i, block); }

// sizes[b]: rank b's output size. in_place: the output is this rank's block
// of one contiguous input (reduce_scatter_tensor in place).
void check_reduce_scatter(ProcessGroup& pg, ReduceOp op, DType dtype, const std::vector<size_t>& sizes,
                          const std::string& label, bool in_place = false) {
  const int n = pg.size(), me = pg.rank();
  size_t total = 0;
  std::vector<size_t> offset;
  for (size_t s : sizes) {
    offset.push_back(total);
    total += s;
  }
  Buffer input(dtype, total), before(dtype, total);
  for (int b = 0; b < n; ++b)
    for (size_t i = 0; i < sizes[b]; ++i) {
      input.set(offset[b] + i, rs_input(op, me, b, i));
      before.set(offset[b] + i, rs_input(op, me, b, i));
    }
  Buffer separate(dtype, sizes[me], [](size_t) { return 99L; });
  const size_t esize = dtype_size(dtype);
  std::vector<Tensor> blocks;
  for (int b = 0; b < n; ++b)
    blocks.push_back(Tensor(static_cast<char*>(input.data()) + offset[b] * esize, dtype, {int64_t(sizes[b])}));
  Tensor out = in_place ? blocks[me] : separate.tensor();
  pg.reduce_scatter(out, blocks, op)->wait();
  Buffer got(dtype, sizes[me]);
  if (sizes[me] > 0) std::memcpy(got.data(), out.data(), sizes[me] * esize);
  std::string what = describe("reduce_scatter", dtype, sizes[me], n, std::string(op.name()) + " " + label);
  require_same(got, reference_reduction(op, dtype, sizes[me], n, [&](int r, size_t i) { return rs_input(op, r, me, i); }),
               what);
  if (!in_place) require(input.same_bytes(before), what + ": input modified");
}

class ReduceScatterAlgo : public ForcedAlgorithm {};

TEST_P(ReduceScatterAlgo, EveryOpDtypeEqualAndUnevenBlocks) {
  ScopedEnv force("TDIST_ALGO_REDUCE_SCATTER", algorithm());
  with_thread_world(world(), [&](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dtype)) continue;
        for (size_t count : {size_t{0}, size_t{1}, size_t{3}}) {
          check_reduce_scatter(pg, op, dtype, std::vector<size_t>(n, count), label("equal"));
          std::vector<size_t> uneven;
          for (int b = 0; b < n; ++b) uneven.push_back(b % 3 == 1 ? 0 : count + static_cast<size_t>(b));
          check_reduce_scatter(pg, op, dtype, uneven, label("uneven"));
        }
      }
  });
}

TEST_P(ReduceScatterAlgo, InPlaceBlockOfTheInput) {
  ScopedEnv force("TDIST_ALGO_REDUCE_SCATTER", algorithm()), segments("TDIST_ALGO_SEGMENT_BYTES", kSmallSegments);
  with_thread_world(world(), [&](ProcessGroup& pg) {
    const int n = pg.size();
    for (size_t count : {size_t{1}, size_t{13}, kLargeCount / 4})
      check_reduce_scatter(pg, ReduceOp::SUM, DType::Float32, std::vector<size_t>(n, count), label("in place"),
                           /*in_place=*/true);
  });
}

TEST_P(ReduceScatterAlgo, LargeUnevenInManySegments) {
  ScopedEnv force("TDIST_ALGO_REDUCE_SCATTER", algorithm()), segments("TDIST_ALGO_SEGMENT_BYTES", kSmallSegments);
  with_thread_world(world(), [&](ProcessGroup& pg) {
    const int n = pg.size();
    std::vector<size_t> sizes;
    for (int b = 0; b < n; ++b) sizes.push_back(kLargeCount / static_cast<size_t>(n) + 3 * static_cast<size_t>(b));
    check_reduce_scatter(pg, ReduceOp::SUM, DType::Float32, sizes, label("large uneven"));
    check_reduce_scatter(pg, ReduceOp::premul_sum(0.5), DType::BFloat16, sizes, label("large uneven"));
  });
}

INSTANTIATE_TEST_SUITE_P(Forced, ReduceScatterAlgo, algo_params({"ring", "recursive_halving"}), algo_param_name);

// --- the selector ------------------------------------------------------------

// A group checks its TDIST_ALGO_* settings when it is made: an unknown name
// fails there, on every rank, naming the setting and the valid names (not at
// the collective's first call, when other work may already have run).
TEST(AlgorithmSelector, UnknownNameIsAValueErrorListingTheValidNames) {
  struct Case {
    const char* var;
    std::vector<std::string> valid;
  };
  const std::vector<Case> cases = {
      {"TDIST_ALGO_ALL_REDUCE", {"recursive_doubling", "rabenseifner", "ring"}},
      {"TDIST_ALGO_REDUCE", {"binomial", "rabenseifner"}},
      {"TDIST_ALGO_REDUCE_SCATTER", {"ring", "recursive_halving"}},
      {"TDIST_ALGO_BROADCAST", {"binomial", "scatter_allgather", "chain"}},
      {"TDIST_ALGO_ALL_GATHER", {"ring", "bruck"}},
      {"TDIST_ALGO_GATHER", {"linear", "binomial"}},
      {"TDIST_ALGO_SCATTER", {"linear", "binomial"}},
      {"TDIST_ALGO_ALL_TO_ALL", {"pairwise", "bruck", "linear"}},
      {"TDIST_ALGO_BARRIER", {"dissemination"}},
  };
  for (const Case& c : cases) {
    ScopedEnv force(c.var, "no_such_algorithm");
    auto store = std::make_shared<HashStore>();
    const std::string var = c.var;
    run_in_threads(2, [&](int rank) {
      std::string msg = value_error_of([&] { ProcessGroup pg(store, rank, 2, ProcessGroupOptions{}); }, var);
      require(has(msg, var + "=no_such_algorithm"), var + ": the error does not name the setting: " + msg);
      for (const std::string& name : c.valid)
        require(has(msg, name), var + ": the error does not list " + name + ": " + msg);
    });
  }
}

}  // namespace
}  // namespace tdist::testing
