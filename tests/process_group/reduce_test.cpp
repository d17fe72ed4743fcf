// ProcessGroup::reduce over every world size, root, op x dtype and size,
// ranks as threads: the root gets the reduction computed locally, the other
// ranks' tensors stay exactly as given.
#include "process_group/coll_util.h"

namespace tdist::testing {
namespace {

void check_reduce(ProcessGroup& pg, int root, ReduceOp op, DType dtype, size_t count, int salt) {
  const int n = pg.size(), me = pg.rank();
  auto input = [&](int r, size_t i) { return reduce_input(op, r, i, salt); };
  Buffer buf(dtype, count, [&](size_t i) { return input(me, i); });
  Buffer before(dtype, count, [&](size_t i) { return input(me, i); });
  auto work = pg.reduce(buf.tensor(), root, op);
  work->wait();
  require(work->is_completed() && work->is_success(), "reduce work not successful after wait");
  std::string what = describe("reduce", dtype, count, n, std::string(op.name()) + " root " + std::to_string(root));
  if (me == root)
    require_same(buf, reference_reduction(op, dtype, count, n, input), what);
  else
    require(buf.same_bytes(before), what + ": a non-root tensor was modified");
}

class CollReduce : public ::testing::TestWithParam<int> {};

TEST_P(CollReduce, EveryRootOpDtypeAndSmallSize) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    for (int root = 0; root < pg.size(); ++root)
      for (DType dtype : all_dtypes())
        for (ReduceOp op : all_ops()) {
          if (!reduce_op_supported(op, dtype)) continue;
          for (size_t count : small_sizes()) check_reduce(pg, root, op, dtype, count, root);
        }
  });
}

// Large tensors: every op x dtype, the root moving through every rank.
TEST_P(CollReduce, LargeEveryOpAndDtype) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    int k = 0;
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dtype)) continue;
        check_reduce(pg, k++ % pg.size(), op, dtype, kLarge, 3);
      }
  });
}

// Several reduces in flight at once, to different roots, waited in reverse order.
TEST_P(CollReduce, ManyInFlightToDifferentRoots) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    const int n = pg.size();
    std::vector<std::vector<int64_t>> bufs(12, std::vector<int64_t>(257));
    std::vector<std::shared_ptr<Work>> works;
    for (size_t k = 0; k < bufs.size(); ++k) {
      for (auto& x : bufs[k]) x = static_cast<int64_t>(k * 100 + pg.rank());
      works.push_back(pg.reduce(bufs[k], static_cast<int>(k) % n, ReduceOp::SUM));
    }
    for (size_t k = bufs.size(); k-- > 0;) works[k]->wait();
    for (size_t k = 0; k < bufs.size(); ++k) {
      int64_t want = pg.rank() == static_cast<int>(k) % n ? static_cast<int64_t>(k * 100 * n + n * (n - 1) / 2)
                                                          : static_cast<int64_t>(k * 100 + pg.rank());
      for (auto x : bufs[k]) ASSERT_EQ(x, want) << "reduce #" << k;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollReduce, ::testing::ValuesIn(world_sizes()), world_name);

}  // namespace
}  // namespace tdist::testing
