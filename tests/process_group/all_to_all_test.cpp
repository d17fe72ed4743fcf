// all_to_all (uneven sizes) and all_to_all_single (equal splits, uneven
// input/output splits, 2-D tensors whose splits count rows) over every world
// size, dtype and size, ranks as threads.
#include "process_group/coll_util.h"

namespace tdist::testing {
namespace {

// Elements rank `from` sends to rank `to` in the uneven cases (some zero).
size_t pair_count(size_t base, int from, int to) {
  if ((from + 2 * to) % 4 == 3) return 0;
  return base + static_cast<size_t>((from * 3 + to) % 5);
}

void check_all_to_all(ProcessGroup& pg, DType dtype, size_t base, bool uneven) {
  const int n = pg.size(), me = pg.rank();
  auto count = [&](int from, int to) { return uneven ? pair_count(base, from, to) : base; };
  std::vector<Buffer> inputs, outputs;
  std::vector<Tensor> in_views, out_views;
  for (int q = 0; q < n; ++q) {
    inputs.emplace_back(dtype, count(me, q), [&](size_t i) { return move_value(me, q, i); });
    outputs.emplace_back(dtype, count(q, me), [](size_t) { return 99L; });
  }
  for (auto& b : inputs) in_views.push_back(b.tensor());
  for (auto& b : outputs) out_views.push_back(b.tensor());
  auto work = pg.all_to_all(out_views, in_views);
  work->wait();
  for (int q = 0; q < n; ++q)
    require_same(outputs[q], Buffer(dtype, count(q, me), [&](size_t i) { return move_value(q, me, i); }),
                 describe("all_to_all", dtype, base, n, std::string(uneven ? "uneven" : "equal") + " block from rank " +
                                                            std::to_string(q)));
  require(work->result().size() == static_cast<size_t>(n), "all_to_all Work::result() is not the output list");
}

// rows(from, to) rows of `cols` elements each; splits empty when `equal`.
void check_all_to_all_single(ProcessGroup& pg, DType dtype, size_t base, size_t cols, bool equal) {
  const int n = pg.size(), me = pg.rank();
  auto rows = [&](int from, int to) { return equal ? base : pair_count(base, from, to); };
  std::vector<int64_t> in_splits, out_splits;
  size_t in_rows = 0, out_rows = 0;
  for (int q = 0; q < n; ++q) {
    in_splits.push_back(static_cast<int64_t>(rows(me, q)));
    out_splits.push_back(static_cast<int64_t>(rows(q, me)));
    in_rows += rows(me, q);
    out_rows += rows(q, me);
  }
  // Element e of the input: which destination block, row and column it is.
  std::vector<long> in_values, want_values;
  for (int q = 0; q < n; ++q)
    for (size_t e = 0; e < rows(me, q) * cols; ++e) in_values.push_back(move_value(me, q, e));
  for (int q = 0; q < n; ++q)
    for (size_t e = 0; e < rows(q, me) * cols; ++e) want_values.push_back(move_value(q, me, e));
  Buffer input(dtype, in_values.size(), [&](size_t i) { return in_values[i]; });
  Buffer output(dtype, want_values.size(), [](size_t) { return 99L; });
  auto shape = [&](size_t r) {
    return cols == 1 ? std::vector<int64_t>{static_cast<int64_t>(r)}
                     : std::vector<int64_t>{static_cast<int64_t>(r), static_cast<int64_t>(cols)};
  };
  Tensor in_t(input.data(), dtype, shape(in_rows));
  Tensor out_t(output.data(), dtype, shape(out_rows));
  if (equal)
    pg.all_to_all_single(out_t, in_t)->wait();
  else
    pg.all_to_all_single(out_t, in_t, out_splits, in_splits)->wait();
  require_same(output, Buffer(dtype, want_values.size(), [&](size_t i) { return want_values[i]; }),
               describe("all_to_all_single", dtype, base, n,
                        std::string(equal ? "equal" : "uneven") + " splits, " + std::to_string(cols) + " columns"));
}

class CollAllToAll : public ::testing::TestWithParam<int> {};

TEST_P(CollAllToAll, ListsEqualAndUnevenEveryDtypeAndSize) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType dtype : all_dtypes())
      for (size_t count : all_sizes()) {
        size_t base = count == kLarge ? kLarge / (n * n) + 1 : count;  // ~50k elements per rank in all
        check_all_to_all(pg, dtype, base, false);
        check_all_to_all(pg, dtype, base, true);
      }
  });
}

TEST_P(CollAllToAll, SingleEqualAndUnevenSplitsOneAndTwoDimensions) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType dtype : all_dtypes())
      for (size_t count : all_sizes())
        for (size_t cols : {size_t{1}, size_t{3}}) {
          size_t base = count == kLarge ? kLarge / (n * cols) + 1 : count;
          check_all_to_all_single(pg, dtype, base, cols, true);
          check_all_to_all_single(pg, dtype, base, cols, false);
        }
  });
}

// all_to_all_single with explicit split lists that are equal to the default.
TEST_P(CollAllToAll, SingleExplicitEqualSplitsMatchDefault) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    std::vector<int32_t> in(4 * n), out(4 * n, -1);
    for (int i = 0; i < 4 * n; ++i) in[i] = me * 1000 + i;
    std::vector<int64_t> splits(n, 4);
    pg.all_to_all_single(out, in, splits, splits)->wait();
    for (int q = 0; q < n; ++q)
      for (int j = 0; j < 4; ++j) ASSERT_EQ(out[q * 4 + j], q * 1000 + me * 4 + j);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollAllToAll, ::testing::ValuesIn(world_sizes()), world_name);

}  // namespace
}  // namespace tdist::testing
