// reduce_scatter (equal and uneven blocks) and reduce_scatter_tensor
// (concatenated and stacked input) over every world size, op x dtype and
// size, ranks as threads, against reductions computed locally.
#include "process_group/coll_util.h"

namespace tdist::testing {
namespace {

// The value rank `from` contributes to element i of rank `block`'s output.
long rs_input(ReduceOp op, int from, int block, size_t i) { return reduce_input(op, from, i, block); }

// sizes[b]: the output size of rank b (every rank passes the same list).
void check_reduce_scatter(ProcessGroup& pg, ReduceOp op, DType dtype, const std::vector<size_t>& sizes,
                          const std::string& label) {
  const int n = pg.size(), me = pg.rank();
  std::vector<Buffer> inputs, before;
  std::vector<Tensor> views;
  for (int b = 0; b < n; ++b) {
    inputs.emplace_back(dtype, sizes[b], [&](size_t i) { return rs_input(op, me, b, i); });
    before.emplace_back(dtype, sizes[b], [&](size_t i) { return rs_input(op, me, b, i); });
  }
  for (auto& b : inputs) views.push_back(b.tensor());
  Buffer out(dtype, sizes[me], [](size_t) { return 99L; });
  auto work = pg.reduce_scatter(out.tensor(), views, op);
  work->wait();
  std::string what = describe("reduce_scatter", dtype, sizes[me], n, std::string(op.name()) + " " + label);
  require_same(out, reference_reduction(op, dtype, sizes[me], n, [&](int r, size_t i) { return rs_input(op, r, me, i); }),
               what);
  for (int b = 0; b < n; ++b) require(inputs[b].same_bytes(before[b]), what + ": input list modified");
}

void check_reduce_scatter_tensor(ProcessGroup& pg, ReduceOp op, DType dtype, size_t count, bool stacked) {
  const int n = pg.size(), me = pg.rank();
  Buffer input(dtype, count * n, [&](size_t i) { return rs_input(op, me, static_cast<int>(i / count), i % count); });
  Buffer before(dtype, count * n, [&](size_t i) { return rs_input(op, me, static_cast<int>(i / count), i % count); });
  std::vector<int64_t> shape = stacked ? std::vector<int64_t>{n, static_cast<int64_t>(count)}
                                       : std::vector<int64_t>{static_cast<int64_t>(count) * n};
  Buffer out(dtype, count, [](size_t) { return 99L; });
  auto work = pg.reduce_scatter_tensor(out.tensor(), Tensor(input.data(), dtype, shape), op);
  work->wait();
  std::string what = describe("reduce_scatter_tensor", dtype, count, n,
                              std::string(op.name()) + (stacked ? " stacked" : " concatenated"));
  require_same(out, reference_reduction(op, dtype, count, n, [&](int r, size_t i) { return rs_input(op, r, me, i); }),
               what);
  require(input.same_bytes(before), what + ": input modified");
  require(work->result().size() == 1 && work->result()[0].data() == out.data(), what + ": Work::result()");
}

class CollReduceScatter : public ::testing::TestWithParam<int> {};

TEST_P(CollReduceScatter, EveryOpDtypeEqualAndUnevenBlocks) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dtype)) continue;
        for (size_t count : small_sizes()) {
          check_reduce_scatter(pg, op, dtype, std::vector<size_t>(n, count), "equal");
          std::vector<size_t> uneven;
          for (int b = 0; b < n; ++b) uneven.push_back(b % 3 == 1 ? 0 : count + b);
          check_reduce_scatter(pg, op, dtype, uneven, "uneven");
        }
      }
  });
}

// ~50k elements in all per rank, uneven blocks, every op x dtype.
TEST_P(CollReduceScatter, LargeUnevenEveryOpAndDtype) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size();
    std::vector<size_t> sizes;
    for (int b = 0; b < n; ++b) sizes.push_back(kLarge / n + 3 * b);
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops())
        if (reduce_op_supported(op, dtype)) check_reduce_scatter(pg, op, dtype, sizes, "large uneven");
  });
}

TEST_P(CollReduceScatter, TensorConcatenatedAndStackedEveryOpDtypeAndSize) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size();
    int k = 0;
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dtype)) continue;
        for (size_t count : small_sizes())
          for (bool stacked : {false, true}) check_reduce_scatter_tensor(pg, op, dtype, count, stacked);
        check_reduce_scatter_tensor(pg, op, dtype, kLarge / n + 1, (k++ % 2) != 0);
      }
  });
}

// In place: the output is this rank's block of the input (its own inputs
// must still be read as given, not as partially reduced).
TEST_P(CollReduceScatter, TensorInPlace) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}}) {
      std::vector<int64_t> in(count * n);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int64_t>(me * 1000 + i);
      Tensor all(in);
      Tensor mine = all.slice(static_cast<int64_t>(me * count), static_cast<int64_t>(count));
      pg.reduce_scatter_tensor(mine, all, ReduceOp::SUM)->wait();
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(in[me * count + i], static_cast<int64_t>(1000 * n * (n - 1) / 2 + n * (me * count + i)))
            << "count " << count << " element " << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollReduceScatter, ::testing::ValuesIn(world_sizes()), world_name);

}  // namespace
}  // namespace tdist::testing
