// broadcast and barrier over every world size, root, dtype and size.
#include <gtest/gtest.h>

#include <atomic>

#include "backends/world.h"

namespace tdist::testing {
namespace {

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, BroadcastEveryRootDtypeAndSize) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    for (int root = 0; root < pg.size(); ++root)
      for (DType dtype : all_dtypes())
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{100003}}) {
          auto value = [&](size_t i) { return static_cast<long>((i * 31 + root * 7) % 100); };
          Buffer want(dtype, count, value);
          Buffer buf = pg.rank() == root ? Buffer(dtype, count, value) : Buffer(dtype, count, [](size_t) { return 0L; });
          pg.broadcast(buf.tensor(), root)->wait();
          long diff = buf.first_difference(want);
          if (diff >= 0)
            throw std::runtime_error("broadcast from root " + std::to_string(root) + " of " +
                                     std::string(dtype_name(dtype)) + " x" + std::to_string(count) +
                                     ": element " + std::to_string(diff) + " is " + buf.at(diff) + ", expected " +
                                     want.at(diff));
        }
  });
}

TEST_P(Collectives, BarrierHoldsEveryRankUntilAllArrive) {
  std::atomic<int> arrived{0};
  const int n = GetParam();
  with_thread_world(n, [&](ProcessGroup& pg) {
    for (int round = 1; round <= 5; ++round) {
      arrived.fetch_add(1);
      pg.barrier()->wait();
      // Nobody leaves round k before all n have entered it.
      EXPECT_GE(arrived.load(), round * n);
      pg.barrier()->wait();  // keep rounds apart
    }
  });
}

TEST_P(Collectives, AsyncBroadcastsAndAllReducesInterleave) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    int n = pg.size();
    std::vector<std::vector<int64_t>> b(6, std::vector<int64_t>(17)), a(6, std::vector<int64_t>(17));
    std::vector<std::shared_ptr<Work>> works;
    for (int k = 0; k < 6; ++k) {
      int root = k % n;
      for (auto& x : b[k]) x = pg.rank() == root ? 100 + k : -1;
      for (auto& x : a[k]) x = pg.rank();
      works.push_back(pg.broadcast(b[k], root));
      works.push_back(pg.all_reduce(a[k], ReduceOp::MAX));
    }
    for (auto& w : works) w->wait();
    for (int k = 0; k < 6; ++k) {
      for (auto x : b[k]) ASSERT_EQ(x, 100 + k);
      for (auto x : a[k]) ASSERT_EQ(x, n - 1);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Collectives, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(CollectiveErrors, InvalidRootIsAValueError) {
  with_thread_world(3, [](ProcessGroup& pg) {
    std::vector<int> v(3);
    EXPECT_THROW(pg.broadcast(v, 3), DistValueError);
    EXPECT_THROW(pg.broadcast(v, -1), DistValueError);
    pg.broadcast(v, 0)->wait();  // still usable
  });
}

}  // namespace
}  // namespace tdist::testing
