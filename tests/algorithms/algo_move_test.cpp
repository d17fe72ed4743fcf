// Every algorithm of the collectives that move data (broadcast, all_gather,
// gather, scatter, all_to_all) forced by name over every world size, root,
// dtype, edge sizes and large pipelined sizes, against data built locally.
#include "algorithms/algo_test_util.h"

namespace tdist::testing {
namespace {

constexpr long kSentinel = 99;  // never produced by move_value (1..97)

// --- broadcast ---------------------------------------------------------------

void check_broadcast(ProcessGroup& pg, int root, DType dtype, size_t count, const std::string& label) {
  auto value = [&](size_t i) { return move_value(root, 0, i); };
  Buffer buf = pg.rank() == root ? Buffer(dtype, count, value) : Buffer(dtype, count, [](size_t) { return kSentinel; });
  pg.broadcast(buf.tensor(), root)->wait();
  require_same(buf, Buffer(dtype, count, value),
               describe("broadcast", dtype, count, pg.size(), "root " + std::to_string(root) + " " + label));
}

class BroadcastAlgo : public ForcedAlgorithm {};

TEST_P(BroadcastAlgo, EveryRootDtypeAndEdgeSize) {
  ScopedEnv force("TDIST_ALGO_BROADCAST", algorithm());
  with_thread_world(world(), [&](ProcessGroup& pg) {
    for (int root = 0; root < pg.size(); ++root)
      for (DType dtype : move_dtypes())
        for (size_t count : edge_sizes()) check_broadcast(pg, root, dtype, count, label());
  });
}

TEST_P(BroadcastAlgo, LargeEveryRootInManySegments) {
  ScopedEnv force("TDIST_ALGO_BROADCAST", algorithm()), segments("TDIST_ALGO_SEGMENT_BYTES", kSmallSegments);
  with_thread_world(world(), [&](ProcessGroup& pg) {
    for (int root = 0; root < pg.size(); ++root)
      check_broadcast(pg, root, root % 2 ? DType::Int8 : DType::Float32, kLargeCount, label("small segments"));
  });
}

INSTANTIATE_TEST_SUITE_P(Forced, BroadcastAlgo, algo_params({"binomial", "scatter_allgather", "chain"}),
                         algo_param_name);

// --- all_gather --------------------------------------------------------------

// sizes[r]: rank r's contribution. contiguous: the outputs are the blocks of
// one tensor (all_gather_into_tensor's layout); in_place: this rank's output
// block is its input.
void check_all_gather(ProcessGroup& pg, DType dtype, const std::vector<size_t>& sizes, const std::string& label,
                      bool contiguous = false, bool in_place = false) {
  const int n = pg.size(), me = pg.rank();
  size_t total = 0;
  for (size_t s : sizes) total += s;
  Buffer whole(dtype, total, [](size_t) { return kSentinel; });
  std::vector<Buffer> separate;
  std::vector<Tensor> outputs;
  size_t at = 0;
  for (int r = 0; r < n; ++r) {
    if (contiguous) {
      outputs.push_back(Tensor(static_cast<char*>(whole.data()) + at * dtype_size(dtype), dtype, {int64_t(sizes[r])}));
    } else {
      separate.emplace_back(dtype, sizes[r], [](size_t) { return kSentinel; });
    }
    at += sizes[r];
  }
  for (auto& b : separate) outputs.push_back(b.tensor());
  Buffer input(dtype, sizes[me], [&](size_t i) { return move_value(me, 0, i); });
  if (in_place && sizes[me] > 0) std::memcpy(outputs[me].data(), input.data(), input.nbytes());
  pg.all_gather(outputs, in_place ? outputs[me] : input.tensor())->wait();
  for (int r = 0; r < n; ++r) {
    Buffer got(dtype, sizes[r]);
    if (sizes[r] > 0) std::memcpy(got.data(), outputs[r].data(), got.nbytes());
    require_same(got, Buffer(dtype, sizes[r], [&](size_t i) { return move_value(r, 0, i); }),
                 describe("all_gather", dtype, sizes[r], n, label + " block of rank " + std::to_string(r)));
  }
}

class AllGatherAlgo : public ForcedAlgorithm {};

TEST_P(AllGatherAlgo, EveryDtypeEqualUnevenContiguousAndInPlace) {
  ScopedEnv force("TDIST_ALGO_ALL_GATHER", algorithm());
  with_thread_world(world(), [&](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType dtype : move_dtypes())
      for (size_t count : edge_sizes()) {
        std::vector<size_t> equal(n, count), uneven;
        for (int r = 0; r < n; ++r) uneven.push_back(r % 3 == 1 ? 0 : count + static_cast<size_t>(r));
        check_all_gather(pg, dtype, equal, label("equal"));
        check_all_gather(pg, dtype, uneven, label("uneven"));
        check_all_gather(pg, dtype, equal, label("contiguous"), /*contiguous=*/true);
        check_all_gather(pg, dtype, uneven, label("in place"), /*contiguous=*/true, /*in_place=*/true);
      }
  });
}

TEST_P(AllGatherAlgo, LargeEqualAndUneven) {
  ScopedEnv force("TDIST_ALGO_ALL_GATHER", algorithm());
  with_thread_world(world(), [&](ProcessGroup& pg) {
    const int n = pg.size();
    check_all_gather(pg, DType::Float32, std::vector<size_t>(n, kLargeCount / n), label("large"), true);
    std::vector<size_t> uneven;
    for (int r = 0; r < n; ++r) uneven.push_back(kLargeCount / n + 5 * static_cast<size_t>(r));
    check_all_gather(pg, DType::Int16, uneven, label("large uneven"));
  });
}

INSTANTIATE_TEST_SUITE_P(Forced, AllGatherAlgo, algo_params({"ring", "bruck"}), algo_param_name);

// --- gather and scatter ------------------------------------------------------

void check_gather(ProcessGroup& pg, int root, DType dtype, size_t count, const std::string& label) {
  const int n = pg.size(), me = pg.rank();
  Buffer input(dtype, count, [&](size_t i) { return move_value(me, root, i); });
  std::vector<Buffer> outputs;
  std::vector<Tensor> views;
  if (me == root)
    for (int r = 0; r < n; ++r) outputs.emplace_back(dtype, count, [](size_t) { return kSentinel; });
  for (auto& b : outputs) views.push_back(b.tensor());
  pg.gather(views, input.tensor(), root)->wait();
  for (int r = 0; r < static_cast<int>(outputs.size()); ++r)
    require_same(outputs[r], Buffer(dtype, count, [&](size_t i) { return move_value(r, root, i); }),
                 describe("gather", dtype, count, n, "root " + std::to_string(root) + " " + label + " block " +
                                                         std::to_string(r)));
}

void check_scatter(ProcessGroup& pg, int root, DType dtype, size_t count, const std::string& label) {
  const int n = pg.size(), me = pg.rank();
  std::vector<Buffer> inputs;
  std::vector<Tensor> views;
  if (me == root)
    for (int r = 0; r < n; ++r) inputs.emplace_back(dtype, count, [&](size_t i) { return move_value(root, r, i); });
  for (auto& b : inputs) views.push_back(b.tensor());
  Buffer output(dtype, count, [](size_t) { return kSentinel; });
  pg.scatter(output.tensor(), views, root)->wait();
  require_same(output, Buffer(dtype, count, [&](size_t i) { return move_value(root, me, i); }),
               describe("scatter", dtype, count, n, "root " + std::to_string(root) + " " + label));
}

class GatherScatterAlgo : public ForcedAlgorithm {};

TEST_P(GatherScatterAlgo, EveryRootDtypeAndSize) {
  ScopedEnv gather("TDIST_ALGO_GATHER", algorithm()), scatter("TDIST_ALGO_SCATTER", algorithm());
  with_thread_world(world(), [&](ProcessGroup& pg) {
    for (int root = 0; root < pg.size(); ++root) {
      for (DType dtype : move_dtypes())
        for (size_t count : edge_sizes()) {
          check_gather(pg, root, dtype, count, label());
          check_scatter(pg, root, dtype, count, label());
        }
      check_gather(pg, root, DType::Float32, kLargeCount / pg.size(), label("large"));
      check_scatter(pg, root, DType::Float32, kLargeCount / pg.size(), label("large"));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Forced, GatherScatterAlgo, algo_params({"linear", "binomial"}), algo_param_name);

// --- all_to_all --------------------------------------------------------------

// sizes[from][to]: what rank `from` sends to rank `to`.
void check_all_to_all(ProcessGroup& pg, DType dtype, const std::vector<std::vector<size_t>>& sizes,
                      const std::string& label) {
  const int n = pg.size(), me = pg.rank();
  std::vector<Buffer> inputs, outputs;
  std::vector<Tensor> in_views, out_views;
  for (int to = 0; to < n; ++to) inputs.emplace_back(dtype, sizes[me][to], [&](size_t i) { return move_value(me, to, i); });
  for (int from = 0; from < n; ++from) outputs.emplace_back(dtype, sizes[from][me], [](size_t) { return kSentinel; });
  for (auto& b : inputs) in_views.push_back(b.tensor());
  for (auto& b : outputs) out_views.push_back(b.tensor());
  pg.all_to_all(out_views, in_views)->wait();
  for (int from = 0; from < n; ++from)
    require_same(outputs[from], Buffer(dtype, sizes[from][me], [&](size_t i) { return move_value(from, me, i); }),
                 describe("all_to_all", dtype, sizes[from][me], n, label + " from rank " + std::to_string(from)));
}

class AllToAllAlgo : public ForcedAlgorithm {};

TEST_P(AllToAllAlgo, EveryDtypeAndSize) {
  ScopedEnv force("TDIST_ALGO_ALL_TO_ALL", algorithm());
  with_thread_world(world(), [&](ProcessGroup& pg) {
    const int n = pg.size();
    for (DType dtype : move_dtypes())
      for (size_t count : edge_sizes())
        check_all_to_all(pg, dtype, std::vector<std::vector<size_t>>(n, std::vector<size_t>(n, count)), label());
    check_all_to_all(pg, DType::Float32,
                     std::vector<std::vector<size_t>>(n, std::vector<size_t>(n, kLargeCount / n)), label("large"));
  });
}

INSTANTIATE_TEST_SUITE_P(Forced, AllToAllAlgo, algo_params({"pairwise", "bruck", "linear"}), algo_param_name);

}  // namespace
}  // namespace tdist::testing
