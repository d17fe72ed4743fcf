// The forced-algorithm matrix: every algorithm of every collective, chosen by
// name with TDIST_ALGO_<COLLECTIVE>, over every world size, against results
// computed locally. Ranks are threads; the variables are set before the ranks
// start (they read them on every call).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "process_group/coll_util.h"
#include "common/scoped_env.h"

namespace tdist::testing {

// Sizes every algorithm must get right: empty, one element, fewer elements
// than ranks, odd, not a multiple of any world size tested.
inline const std::vector<size_t>& edge_sizes() {
  static const std::vector<size_t> v = {0, 1, 3, 7, 13};
  return v;
}

// Large: float32 x kLargeCount is 1 MiB + 12 bytes. With kSmallSegments the
// pipelines run hundreds of segments (window wrap-around, uneven last ones).
inline constexpr size_t kLargeCount = (size_t{1} << 18) + 3;
inline constexpr const char* kSmallSegments = "16384";

// One dtype of each element size, for collectives that move data without
// reducing (only the size matters to them).
inline const std::vector<DType>& move_dtypes() {
  static const std::vector<DType> v = {DType::Bool, DType::BFloat16, DType::Int32, DType::Float64,
                                       DType::Complex128};
  return v;
}

// Test parameter: (algorithm name, world size).
using AlgoParam = std::tuple<std::string, int>;

inline std::string algo_param_name(const ::testing::TestParamInfo<AlgoParam>& info) {
  return std::get<0>(info.param) + "_world" + std::to_string(std::get<1>(info.param));
}

inline auto algo_params(std::vector<std::string> algorithms) {
  return ::testing::Combine(::testing::ValuesIn(algorithms), ::testing::ValuesIn(world_sizes()));
}

// Base of the matrix suites: forces the parameter's algorithm for `var`.
class ForcedAlgorithm : public ::testing::TestWithParam<AlgoParam> {
 protected:
  const std::string& algorithm() const { return std::get<0>(GetParam()); }
  int world() const { return std::get<1>(GetParam()); }
  std::string label(const std::string& more = "") const { return algorithm() + (more.empty() ? "" : " " + more); }
};

}  // namespace tdist::testing
