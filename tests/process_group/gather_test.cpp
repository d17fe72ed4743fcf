// all_gather (equal and uneven sizes), all_gather_into_tensor (concatenated
// and stacked), gather and scatter (every root) over every world size, dtype
// and size, ranks as threads, against data built locally.
#include "process_group/coll_util.h"

namespace tdist::testing {
namespace {

// Rank r's contribution in the uneven case: some ranks give nothing, the others differ.
size_t uneven_size(size_t count, int r) {
  if (count == 0) return static_cast<size_t>(r % 3);  // 0, 1, 2, 0, ...
  return r % 3 == 1 ? 0 : count + static_cast<size_t>(r);
}

constexpr long kSentinel = 99;  // never produced by move_value (1..97)

void check_all_gather(ProcessGroup& pg, DType dtype, const std::vector<size_t>& sizes, const std::string& label) {
  const int n = pg.size(), me = pg.rank();
  Buffer input(dtype, sizes[me], [&](size_t i) { return move_value(me, 0, i); });
  Buffer input_before(dtype, sizes[me], [&](size_t i) { return move_value(me, 0, i); });
  std::vector<Buffer> outputs;
  std::vector<Tensor> views;
  for (int r = 0; r < n; ++r) outputs.emplace_back(dtype, sizes[r], [](size_t) { return kSentinel; });
  for (auto& b : outputs) views.push_back(b.tensor());
  auto work = pg.all_gather(views, input.tensor());
  work->wait();
  for (int r = 0; r < n; ++r)
    require_same(outputs[r], Buffer(dtype, sizes[r], [&](size_t i) { return move_value(r, 0, i); }),
                 describe("all_gather", dtype, sizes[r], n, label + " block of rank " + std::to_string(r)));
  require(input.same_bytes(input_before), "all_gather modified its input");
  require(work->result().size() == static_cast<size_t>(n), "all_gather Work::result() is not the output list");
}

class CollGathers : public ::testing::TestWithParam<int> {};

TEST_P(CollGathers, AllGatherEqualAndUnevenSizesEveryDtype) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType dtype : all_dtypes())
      for (size_t count : all_sizes()) {
        size_t c = count == kLarge ? kLarge / n + 1 : count;  // ~50k elements gathered in all
        check_all_gather(pg, dtype, std::vector<size_t>(n, c), "equal");
        std::vector<size_t> uneven;
        for (int r = 0; r < n; ++r) uneven.push_back(uneven_size(c, r));
        check_all_gather(pg, dtype, uneven, "uneven");
      }
  });
}

// outputs[rank] may be the input itself (in-place all_gather).
TEST_P(CollGathers, AllGatherInPlaceOwnBlock) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    std::vector<std::vector<double>> out(n);
    for (int r = 0; r < n; ++r) out[r].assign(5 + r, -1.0);
    for (size_t i = 0; i < out[me].size(); ++i) out[me][i] = move_value(me, 1, i);
    std::vector<Tensor> views(out.begin(), out.end());
    pg.all_gather(views, views[me])->wait();
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < out[r].size(); ++i) ASSERT_EQ(out[r][i], move_value(r, 1, i)) << "rank " << r;
  });
}

TEST_P(CollGathers, AllGatherIntoTensorConcatenatedAndStacked) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    for (DType dtype : all_dtypes())
      for (size_t size : all_sizes())
        for (bool stacked : {false, true}) {
          const size_t count = size == kLarge ? kLarge / n + 1 : size;  // ~50k elements gathered in all
          Buffer input(dtype, count, [&](size_t i) { return move_value(me, 2, i); });
          Buffer out(dtype, count * n, [](size_t) { return kSentinel; });
          std::vector<int64_t> shape = stacked ? std::vector<int64_t>{n, static_cast<int64_t>(count)}
                                               : std::vector<int64_t>{static_cast<int64_t>(count) * n};
          Tensor output(out.data(), dtype, shape);
          auto work = pg.all_gather_into_tensor(output, input.tensor());
          work->wait();
          Buffer want(dtype, count * n, [&](size_t i) { return move_value(static_cast<int>(i / count), 2, i % count); });
          require_same(out, want, describe("all_gather_into_tensor", dtype, count, n, stacked ? "stacked" : "concatenated"));
          require(work->result().size() == 1 && work->result()[0].data() == out.data() &&
                      work->result()[0].shape() == shape,
                  "all_gather_into_tensor Work::result() is not the output tensor");
        }
  });
}

TEST_P(CollGathers, GatherEveryRootDtypeAndSize) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    for (int root = 0; root < n; ++root)
      for (DType dtype : all_dtypes())
        for (size_t count : all_sizes()) {
          if (count == kLarge && static_cast<int>(dtype) % n != root) continue;  // large: each dtype at one root
          Buffer input(dtype, count, [&](size_t i) { return move_value(me, root, i); });
          Buffer before(dtype, count, [&](size_t i) { return move_value(me, root, i); });
          std::vector<Buffer> outputs;
          std::vector<Tensor> views;
          if (me == root) {
            for (int r = 0; r < n; ++r) outputs.emplace_back(dtype, count, [](size_t) { return kSentinel; });
            for (auto& b : outputs) views.push_back(b.tensor());
          }
          pg.gather(views, input.tensor(), root)->wait();
          std::string what = describe("gather", dtype, count, n, "root " + std::to_string(root));
          require(input.same_bytes(before), what + ": input modified");
          if (me != root) continue;
          for (int r = 0; r < n; ++r)
            require_same(outputs[r], Buffer(dtype, count, [&](size_t i) { return move_value(r, root, i); }),
                         what + " block of rank " + std::to_string(r));
        }
  });
}

TEST_P(CollGathers, ScatterEveryRootDtypeAndSize) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    for (int root = 0; root < n; ++root)
      for (DType dtype : all_dtypes())
        for (size_t count : all_sizes()) {
          if (count == kLarge && static_cast<int>(dtype) % n != root) continue;  // large: each dtype at one root
          std::vector<Buffer> inputs;
          std::vector<Tensor> views;
          if (me == root) {
            for (int r = 0; r < n; ++r) inputs.emplace_back(dtype, count, [&](size_t i) { return move_value(root, r, i); });
            for (auto& b : inputs) views.push_back(b.tensor());
          }
          Buffer out(dtype, count, [](size_t) { return kSentinel; });
          auto work = pg.scatter(out.tensor(), views, root);
          work->wait();
          require_same(out, Buffer(dtype, count, [&](size_t i) { return move_value(root, me, i); }),
                       describe("scatter", dtype, count, n, "root " + std::to_string(root)));
          if (me == root)
            for (int r = 0; r < n; ++r)
              require_same(inputs[r], Buffer(dtype, count, [&](size_t i) { return move_value(root, r, i); }),
                           "scatter modified the root's scatter_list");
        }
  });
}

// In place: the input is this rank's block of the output.
TEST_P(CollGathers, AllGatherIntoTensorInPlace) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size(), me = pg.rank();
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}}) {
      std::vector<int32_t> out(count * n, -1);
      for (size_t i = 0; i < count; ++i) out[me * count + i] = static_cast<int32_t>(move_value(me, 4, i));
      Tensor all(out);
      pg.all_gather_into_tensor(all, all.slice(static_cast<int64_t>(me * count), static_cast<int64_t>(count)))->wait();
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(out[i], move_value(static_cast<int>(i / count), 4, i % count)) << "count " << count << " element " << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollGathers, ::testing::ValuesIn(world_sizes()), world_name);

}  // namespace
}  // namespace tdist::testing
