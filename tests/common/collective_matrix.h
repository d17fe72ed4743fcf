// Every collective of a group against locally computed results: the matrix
// that runs across hosts (emulated by TDIST_HOST_ID in
// tests/engines/hierarchical_engine_test.cpp, and as network namespaces in
// tests/cluster). Each check throws std::runtime_error naming the collective,
// the case and the first wrong element. Inputs are small integers, so sums
// are exact in every type and a result compares exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tdist/distributed.h"

namespace tdist::testing::matrix {

inline void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

// Rank r's element i, for each reducing op (1..13: every sum is exact).
inline double input(int r, size_t i) { return static_cast<double>((r * 7 + static_cast<int>(i % 11)) % 13 + 1); }

// Rank r's value at element i of a moved (not reduced) block.
inline int32_t value(int r, size_t i) { return static_cast<int32_t>(r * 100003 + static_cast<int>(i % 100000)); }

// PRODUCT's inputs stay in 1..2 so that a product of 8 ranks stays exact.
inline double product_input(int r, size_t i) {
  const double v = input(r, i);
  return v > 2 ? 1 : v;
}
inline double input_for(ReduceOp op, int r, size_t i) {
  return op == ReduceOp::PRODUCT ? product_input(r, i) : input(r, i);
}

// What `op` over every rank's input_for(op, r, i) gives, as T would hold it.
template <typename T>
double folded(int n, size_t i, ReduceOp op) {
  double want = op == ReduceOp::PRODUCT ? 1 : 0;
  for (int r = 0; r < n; ++r) {
    const double v = input_for(op, r, i);
    if (op == ReduceOp::MAX) want = std::max(want, v);
    else if (op == ReduceOp::MIN) want = r == 0 ? v : std::min(want, v);
    else if (op == ReduceOp::PRODUCT) want *= v;
    else want += v;
  }
  if (op == ReduceOp::AVG) want = std::is_integral_v<T> ? std::trunc(want / n) : want / n;  // integers truncate
  return want;
}

template <typename T>
void expect_close(double got, double want, const std::string& what, size_t i, size_t count) {
  require(std::fabs(got - want) <= 1e-4 * std::fabs(want), what + ": element " + std::to_string(i) + " of " +
                                                                  std::to_string(count) + " is " + std::to_string(got) +
                                                                  ", expected " + std::to_string(want));
}

template <typename T>
void check_all_reduce(const Group& group, size_t count, ReduceOp op, const std::string& where) {
  const int n = get_world_size(group), me = get_rank(group);
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>(input_for(op, me, i));
  all_reduce(Tensor(data.data(), count), op, group)->wait();
  for (size_t i = 0; i < count; ++i)
    expect_close<T>(static_cast<double>(data[i]), folded<T>(n, i, op), where + ": all_reduce", i, count);
}

// The root gets the result; every other rank's tensor is left as it was.
template <typename T>
void check_reduce(const Group& group, size_t count, int root, ReduceOp op, const std::string& where) {
  const int n = get_world_size(group), me = get_rank(group);
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>(input_for(op, me, i));
  const std::vector<T> before = data;
  reduce(Tensor(data.data(), count), group_dst(root), op, group)->wait();
  const std::string what = where + ": reduce to " + std::to_string(root);
  if (me != root) {
    require(data == before, what + ": a non-root tensor was modified");
    return;
  }
  for (size_t i = 0; i < count; ++i) expect_close<T>(static_cast<double>(data[i]), folded<T>(n, i, op), what, i, count);
}

inline void check_broadcast(const Group& group, size_t count, int root, const std::string& where) {
  const int me = get_rank(group);
  std::vector<int32_t> data(count, -1);
  if (me == root)
    for (size_t i = 0; i < count; ++i) data[i] = value(root, i);
  broadcast(Tensor(data.data(), count), group_src(root), group)->wait();
  for (size_t i = 0; i < count; ++i)
    require(data[i] == value(root, i), where + ": broadcast from " + std::to_string(root) + ", element " +
                                           std::to_string(i) + " is " + std::to_string(data[i]));
}

inline void check_all_gather(const Group& group, size_t count, const std::string& where) {
  const int n = get_world_size(group), me = get_rank(group);
  std::vector<int32_t> in(count), out(count * n, -1);
  for (size_t i = 0; i < count; ++i) in[i] = value(me, i);
  std::vector<Tensor> outs;
  for (int r = 0; r < n; ++r) outs.push_back(Tensor(out.data() + r * count, count));
  all_gather(outs, Tensor(in.data(), count), group)->wait();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      require(out[r * count + i] == value(r, i), where + ": all_gather, rank " + std::to_string(r) + "'s element " +
                                                     std::to_string(i) + " is " + std::to_string(out[r * count + i]));
}

inline void check_gather(const Group& group, size_t count, int root, const std::string& where) {
  const int n = get_world_size(group), me = get_rank(group);
  std::vector<int32_t> in(count), out(me == root ? count * n : 0, -1);
  for (size_t i = 0; i < count; ++i) in[i] = value(me, i);
  std::vector<Tensor> outs;
  if (me == root)
    for (int r = 0; r < n; ++r) outs.push_back(Tensor(out.data() + r * count, count));
  gather(Tensor(in.data(), count), outs, group_dst(root), group)->wait();
  for (size_t k = 0; k < out.size(); ++k)
    require(out[k] == value(static_cast<int>(k / count), k % count),
            where + ": gather to " + std::to_string(root) + ", rank " + std::to_string(k / count) + "'s element " +
                std::to_string(k % count) + " is " + std::to_string(out[k]));
}

inline void check_scatter(const Group& group, size_t count, int root, const std::string& where) {
  const int n = get_world_size(group), me = get_rank(group);
  std::vector<int32_t> in(me == root ? count * n : 0), out(count, -1);
  std::vector<Tensor> ins;
  if (me == root) {
    for (size_t k = 0; k < in.size(); ++k) in[k] = value(static_cast<int>(k / count), k % count);
    for (int r = 0; r < n; ++r) ins.push_back(Tensor(in.data() + r * count, count));
  }
  scatter(Tensor(out.data(), count), ins, group_src(root), group)->wait();
  for (size_t i = 0; i < count; ++i)
    require(out[i] == value(me, i), where + ": scatter from " + std::to_string(root) + ", element " +
                                        std::to_string(i) + " is " + std::to_string(out[i]));
}

template <typename T>
void check_reduce_scatter(const Group& group, size_t count, ReduceOp op, const std::string& where) {
  const int n = get_world_size(group), me = get_rank(group);
  // Rank r's block for rank d, element i: input(r, d * count + i).
  std::vector<T> in(count * n), out(count, T(-1));
  for (size_t k = 0; k < in.size(); ++k) in[k] = static_cast<T>(input_for(op, me, k));
  std::vector<Tensor> ins;
  for (int d = 0; d < n; ++d) ins.push_back(Tensor(in.data() + d * count, count));
  reduce_scatter(Tensor(out.data(), count), ins, op, group)->wait();
  for (size_t i = 0; i < count; ++i)
    expect_close<T>(static_cast<double>(out[i]), folded<T>(n, me * count + i, op), where + ": reduce_scatter", i,
                    count);
}

// Uneven splits: rank s sends (s + d) % 3 + count rows to rank d (count 0: some
// blocks empty).
inline void check_all_to_all_single(const Group& group, size_t count, const std::string& where) {
  const int n = get_world_size(group), me = get_rank(group);
  auto rows = [&](int s, int d) { return static_cast<int64_t>((s + d) % 3 + count); };
  std::vector<int64_t> in_splits, out_splits;
  int64_t in_total = 0, out_total = 0;
  for (int d = 0; d < n; ++d) {
    in_splits.push_back(rows(me, d));
    out_splits.push_back(rows(d, me));
    in_total += rows(me, d);
    out_total += rows(d, me);
  }
  // Element j of the block from s to d: value(s, d * 1000 + j).
  std::vector<int32_t> in(static_cast<size_t>(in_total)), out(static_cast<size_t>(out_total), -1);
  for (int d = 0, at = 0; d < n; ++d)
    for (int64_t j = 0; j < rows(me, d); ++j) in[at++] = value(me, static_cast<size_t>(d * 1000 + j));
  all_to_all_single(Tensor(out.data(), out.size()), Tensor(in.data(), in.size()), out_splits, in_splits, group)->wait();
  for (int s = 0, at = 0; s < n; ++s)
    for (int64_t j = 0; j < rows(s, me); ++j, ++at)
      require(out[at] == value(s, static_cast<size_t>(me * 1000 + j)),
              where + ": all_to_all_single, from rank " + std::to_string(s) + ", row " + std::to_string(j) + " is " +
                  std::to_string(out[at]));
}

// Without split sizes: every block `count` elements of T, element j of the
// block from s to d value(s, d * 1000 + j) (the hierarchical engine's
// grouping by host takes this form only).
template <typename T>
void check_all_to_all_even(const Group& group, size_t count, const std::string& where) {
  const int n = get_world_size(group), me = get_rank(group);
  std::vector<T> in(count * n), out(count * n, T(-1));
  for (int d = 0; d < n; ++d)
    for (size_t j = 0; j < count; ++j) in[d * count + j] = static_cast<T>(value(me, d * 1000 + j));
  all_to_all_single(Tensor(out.data(), out.size()), Tensor(in.data(), in.size()), {}, {}, group)->wait();
  for (int s = 0; s < n; ++s)
    for (size_t j = 0; j < count; ++j)
      require(out[s * count + j] == static_cast<T>(value(s, me * 1000 + j)),
              where + ": all_to_all_single without split sizes, from rank " + std::to_string(s) + ", element " +
                  std::to_string(j) + " is " + std::to_string(out[s * count + j]));
}

// Every collective at one size: several dtypes and ops for the reducing ones,
// the first, middle and last rank as root.
inline void check_collectives(const Group& group, size_t count, const std::string& where) {
  const int n = get_world_size(group);
  const std::string at = where + ", " + std::to_string(count) + " elements";
  check_all_reduce<float>(group, count, ReduceOp::SUM, at + ", float32 SUM");
  check_all_reduce<int64_t>(group, count, ReduceOp::MAX, at + ", int64 MAX");
  check_all_reduce<double>(group, count, ReduceOp::AVG, at + ", float64 AVG");
  check_all_reduce<int32_t>(group, count, ReduceOp::AVG, at + ", int32 AVG");
  check_all_reduce<int32_t>(group, count, ReduceOp::PRODUCT, at + ", int32 PRODUCT");
  for (int root : {0, n / 2, n - 1}) {
    const std::string r = at + ", root " + std::to_string(root);
    check_broadcast(group, count, root, r);
    check_reduce<float>(group, count, root, ReduceOp::SUM, r + ", float32 SUM");
    check_reduce<int32_t>(group, count, root, ReduceOp::MIN, r + ", int32 MIN");
    check_gather(group, count, root, r);
    check_scatter(group, count, root, r);
  }
  check_all_gather(group, count, at);
  check_reduce_scatter<float>(group, count, ReduceOp::SUM, at + ", float32 SUM");
  check_reduce_scatter<double>(group, count, ReduceOp::AVG, at + ", float64 AVG");
  check_reduce_scatter<int64_t>(group, count, ReduceOp::MAX, at + ", int64 MAX");
  check_all_to_all_single(group, count, at);
  check_all_to_all_even<int32_t>(group, count, at + ", int32");
  check_all_to_all_even<double>(group, count, at + ", float64");
  check_all_to_all_even<int8_t>(group, count, at + ", int8");
}

// A large size: the float32 SUM of each reducing collective and one of each
// moving one (the paths that split buffers and stream them).
inline void check_large(const Group& group, size_t count, const std::string& where) {
  const int n = get_world_size(group);
  const std::string at = where + ", " + std::to_string(count) + " elements";
  check_all_reduce<float>(group, count, ReduceOp::SUM, at + ", float32 SUM");
  check_reduce<float>(group, count, n - 1, ReduceOp::SUM, at + ", float32 SUM");
  check_broadcast(group, count, n / 2, at);
  check_all_gather(group, count / n, at);
  check_reduce_scatter<float>(group, count / n, ReduceOp::SUM, at + ", float32 SUM");
  check_gather(group, count / n, 0, at);
  check_scatter(group, count / n, n - 1, at);
  check_all_to_all_single(group, count / n, at);
  check_all_to_all_even<float>(group, count / n, at + ", float32");
}

}  // namespace tdist::testing::matrix
