// ReduceOp names, the (op x dtype) support matrix and its error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tdist/errors.h"
#include "tdist/reduce_op.h"

namespace tdist {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ReduceOpTest, Names) {
  EXPECT_EQ(ReduceOp(ReduceOp::SUM).name(), "SUM");
  EXPECT_EQ(ReduceOp(ReduceOp::AVG).name(), "AVG");
  EXPECT_EQ(ReduceOp(ReduceOp::PRODUCT).name(), "PRODUCT");
  EXPECT_EQ(ReduceOp(ReduceOp::MIN).name(), "MIN");
  EXPECT_EQ(ReduceOp(ReduceOp::MAX).name(), "MAX");
  EXPECT_EQ(ReduceOp(ReduceOp::BAND).name(), "BAND");
  EXPECT_EQ(ReduceOp(ReduceOp::BOR).name(), "BOR");
  EXPECT_EQ(ReduceOp(ReduceOp::BXOR).name(), "BXOR");
  EXPECT_EQ(ReduceOp::premul_sum(2.0).name(), "PREMUL_SUM");
  EXPECT_EQ(ReduceOp(static_cast<ReduceOp::Kind>(42)).name(), "INVALID");
}

TEST(ReduceOpTest, PremulSumCarriesItsFactor) {
  constexpr ReduceOp op = ReduceOp::premul_sum(0.25);
  static_assert(op.kind() == ReduceOp::PREMUL_SUM);
  EXPECT_EQ(op.factor(), 0.25);
  EXPECT_TRUE(op == ReduceOp::PREMUL_SUM);
  EXPECT_FALSE(op == ReduceOp::premul_sum(0.5));
  EXPECT_EQ(ReduceOp().kind(), ReduceOp::SUM);
  EXPECT_EQ(ReduceOp(ReduceOp::MAX).factor(), 1.0);
}

// The matrix written out by hand, one row per op, columns in DType order:
// bool uint8 int8 int16 int32 int64 f16 bf16 f32 f64 c64 c128
constexpr bool kSupported[9][kNumDTypes] = {
    /* SUM        */ {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* AVG        */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* PRODUCT    */ {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* MIN        */ {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
    /* MAX        */ {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
    /* BAND       */ {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
    /* BOR        */ {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
    /* BXOR       */ {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
    /* PREMUL_SUM */ {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1},
};

TEST(ReduceOpTest, SupportMatrix) {
  for (int k = 0; k < 9; ++k) {
    for (int d = 0; d < kNumDTypes; ++d) {
      ReduceOp op(static_cast<ReduceOp::Kind>(k));
      auto dtype = static_cast<DType>(d);
      SCOPED_TRACE(std::string(op.name()) + " " + std::string(dtype_name(dtype)));
      EXPECT_EQ(reduce_op_supported(op, dtype), kSupported[k][d]);
      if (kSupported[k][d]) {
        EXPECT_NO_THROW(check_reduce_op(op, dtype, "all_reduce"));
      } else {
        try {
          check_reduce_op(op, dtype, "reduce_scatter");
          ADD_FAILURE() << "no error";
        } catch (const DistValueError& e) {
          EXPECT_THAT(e.what(), StartsWith("reduce_scatter: ReduceOp." + std::string(op.name()) +
                                           " is not defined for " + std::string(dtype_name(dtype)) + " ("));
        }
      }
    }
  }
  EXPECT_FALSE(reduce_op_supported(ReduceOp::SUM, static_cast<DType>(kNumDTypes)));
  EXPECT_FALSE(reduce_op_supported(static_cast<ReduceOp::Kind>(9), DType::Float32));
}

TEST(ReduceOpTest, MessageNamesOpDtypeOperationAndAlternatives) {
  try {
    check_reduce_op(ReduceOp::MAX, DType::Complex64, "all_reduce");
    FAIL() << "no error";
  } catch (const DistValueError& e) {
    EXPECT_THAT(e.what(), StartsWith("all_reduce: ReduceOp.MAX is not defined for complex64 (complex numbers have "
                                     "no order"));
    EXPECT_THAT(e.what(), HasSubstr("complex64 supports SUM, AVG, PRODUCT, PREMUL_SUM"));
  }
  try {
    check_reduce_op(ReduceOp::BAND, DType::Float32, "reduce");
    FAIL() << "no error";
  } catch (const DistValueError& e) {
    EXPECT_THAT(e.what(), StartsWith("reduce: ReduceOp.BAND is not defined for float32 (bitwise ops need an "
                                     "integer or bool tensor"));
  }
  EXPECT_THROW(check_reduce_op(static_cast<ReduceOp::Kind>(77), DType::Float32, "x"), DistValueError);
  EXPECT_THROW(check_reduce_op(ReduceOp::SUM, static_cast<DType>(77), "x"), DistValueError);
}

}  // namespace
}  // namespace tdist
