// Reduction operators of the reducing collectives.
#pragma once

#include <string_view>

#include "tdist/dtype.h"

namespace tdist {

class ReduceOp {
 public:
  enum Kind : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM };
  constexpr ReduceOp(Kind k = SUM) : kind_(k) {}  // NOLINT: implicit like torch's enum
  // PREMUL_SUM: each input is multiplied by `factor` before the sum.
  static constexpr ReduceOp premul_sum(double factor) { return ReduceOp(PREMUL_SUM, factor); }
  constexpr Kind kind() const { return kind_; }
  constexpr double factor() const { return factor_; }
  constexpr bool operator==(const ReduceOp& o) const { return kind_ == o.kind_ && factor_ == o.factor_; }
  constexpr bool operator==(Kind k) const { return kind_ == k; }
  std::string_view name() const;

 private:
  constexpr ReduceOp(Kind k, double f) : kind_(k), factor_(f) {}
  Kind kind_ = SUM;
  double factor_ = 1.0;
};

// Whether `op` is defined on `dtype` (BAND on float, MAX on complex are not).
bool reduce_op_supported(ReduceOp op, DType dtype);
// Throws DistValueError naming op, dtype and the operation when it is not.
void check_reduce_op(ReduceOp op, DType dtype, std::string_view operation);

}  // namespace tdist
