// all_reduce over every world size, dtype, op and size, ranks as threads,
// against a reduction computed locally.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backends/world.h"
#include "common/reduce_check.h"

namespace tdist::testing {
namespace {

class AllReduce : public ::testing::TestWithParam<int> {};

TEST_P(AllReduce, EveryDtypeOpAndSmallSize) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    for (DType dtype : all_dtypes())
      for (ReduceOp op : all_ops()) {
        if (!reduce_op_supported(op, dtype)) continue;
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) check_all_reduce(pg, op, dtype, count);
      }
  });
}

TEST_P(AllReduce, LargeEveryDtype) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    for (DType dtype : all_dtypes())
      for (ReduceOp op : {ReduceOp(ReduceOp::SUM), ReduceOp(ReduceOp::MAX)})
        if (reduce_op_supported(op, dtype)) check_all_reduce(pg, op, dtype, 70001);
  });
}

// Each algorithm forced, on sizes around its edge cases (fewer elements than ranks, odd splits).
TEST_P(AllReduce, EveryAlgorithmForced) {
  for (const char* algo : {"ring", "recursive_doubling", "rabenseifner"}) {
    setenv("TDIST_ALGO_ALL_REDUCE", algo, 1);
    with_thread_world(GetParam(), [](ProcessGroup& pg) {
      for (size_t count : {size_t{1}, size_t{3}, size_t{8}, size_t{13}, size_t{4097}}) {
        check_all_reduce(pg, ReduceOp::SUM, DType::Float32, count);
        check_all_reduce(pg, ReduceOp::PRODUCT, DType::Int64, count);
        check_all_reduce(pg, ReduceOp::AVG, DType::Float64, count);
      }
    });
  }
  unsetenv("TDIST_ALGO_ALL_REDUCE");
}

TEST_P(AllReduce, ManyInFlightCompleteInOrder) {
  with_thread_world(GetParam(), [](ProcessGroup& pg) {
    std::vector<std::vector<int32_t>> bufs(20, std::vector<int32_t>(33));
    std::vector<std::shared_ptr<Work>> works;
    for (size_t k = 0; k < bufs.size(); ++k) {
      for (auto& x : bufs[k]) x = static_cast<int32_t>(k + pg.rank());
      works.push_back(pg.all_reduce(bufs[k], ReduceOp::SUM));
    }
    int n = pg.size();
    for (size_t k = 0; k < bufs.size(); ++k) {
      works[k]->wait();
      EXPECT_TRUE(works[k]->is_completed());
      EXPECT_TRUE(works[k]->is_success());
      for (auto x : bufs[k]) ASSERT_EQ(x, static_cast<int32_t>(k * n + n * (n - 1) / 2));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllReduce, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(AllReduceErrors, UndefinedOpForDtypeFailsBeforeSending) {
  with_thread_world(2, [](ProcessGroup& pg) {
    std::vector<float> f(4, 1.0f);
    try {
      pg.all_reduce(f, ReduceOp::BAND);
      FAIL() << "BAND on float32 was accepted";
    } catch (const DistValueError& e) {
      EXPECT_NE(std::string(e.what()).find("BAND"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
    }
    // The group is still usable: nothing was sent.
    pg.all_reduce(f, ReduceOp::SUM)->wait();
    EXPECT_EQ(f[0], 2.0f);
  });
}

}  // namespace
}  // namespace tdist::testing
