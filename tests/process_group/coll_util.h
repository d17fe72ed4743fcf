// Shared helpers of the collective test matrix: input values, reference
// results computed locally, comparisons that say what differs.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/world.h"
#include "reduce/reduction_kernels.h"

namespace tdist::testing {

// The sizes of the matrix: empty, one, odd, large.
inline constexpr size_t kLarge = 50003;
inline const std::vector<size_t>& small_sizes() {
  static const std::vector<size_t> v = {0, 1, 7};
  return v;
}
inline const std::vector<size_t>& all_sizes() {
  static const std::vector<size_t> v = {0, 1, 7, kLarge};
  return v;
}

inline const std::vector<int>& world_sizes() {
  static const std::vector<int> v = {1, 2, 3, 4, 5, 8};
  return v;
}

// An input of rank `rank` at element i for reducing `op`: small integers so
// every dtype (float16 included) represents every partial result exactly.
inline long reduce_input(ReduceOp op, int rank, size_t i, int salt = 0) {
  switch (op.kind()) {
    case ReduceOp::PRODUCT: return 1 + static_cast<long>((rank + i + salt) % 2);
    case ReduceOp::BAND: case ReduceOp::BOR: case ReduceOp::BXOR:
      return static_cast<long>((rank * 7 + i * 3 + salt) % 16);
    default: return static_cast<long>(((rank + 1) * ((i + salt) % 5 + 1)) % 13);
  }
}

// Data moved (not reduced) from rank `from` towards rank `to`, element i: 1..97.
inline long move_value(int from, int to, size_t i) {
  return 1 + static_cast<long>((from * 31 + to * 17 + i * 7) % 97);
}

// The reduction of inputs(r, i) over ranks 0..n-1, combined in rank order then finalized.
inline Buffer reference_reduction(ReduceOp op, DType dtype, size_t count, int n,
                                  const std::function<long(int, size_t)>& inputs) {
  Buffer acc(dtype, count, [&](size_t i) { return inputs(0, i); });
  for (int r = 1; r < n; ++r) {
    Buffer in(dtype, count, [&](size_t i) { return inputs(r, i); });
    reduction::combine(op, dtype, acc.data(), acc.data(), in.data(), count);
  }
  reduction::finalize(op, dtype, acc.data(), count, n);
  return acc;
}

// Throws (failing the rank, so the thread world reports it) when got != want.
inline void require_same(const Buffer& got, const Buffer& want, const std::string& what) {
  if (got.count() != want.count())
    throw std::runtime_error(what + ": " + std::to_string(got.count()) + " elements, expected " +
                             std::to_string(want.count()));
  long diff = got.first_difference(want);
  if (diff >= 0)
    throw std::runtime_error(what + ": element " + std::to_string(diff) + " is " + got.at(diff) + ", expected " +
                             want.at(diff));
}

inline void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline std::string describe(const char* op, DType dtype, size_t count, int n, const std::string& more = "") {
  return std::string(op) + " " + std::string(dtype_name(dtype)) + " x" + std::to_string(count) + " on " +
         std::to_string(n) + " ranks" + (more.empty() ? "" : " " + more);
}

inline std::string world_name(const ::testing::TestParamInfo<int>& info) {
  return "world" + std::to_string(info.param);
}

// Runs `fn` and returns the DistValueError it throws (fails if it throws nothing or something else).
template <typename F>
std::string value_error_of(F&& fn, const std::string& what) {
  try {
    fn();
  } catch (const DistValueError& e) {
    return e.what();
  } catch (const std::exception& e) {
    throw std::runtime_error(what + ": expected DistValueError, got: " + e.what());
  }
  throw std::runtime_error(what + ": was accepted, expected DistValueError");
}

}  // namespace tdist::testing
