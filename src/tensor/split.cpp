#include "tensor/split.h"

namespace tdist {

std::vector<Tensor> blocks_of(const Tensor& t, int n) {
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(n));
  const int64_t each = n > 0 ? t.numel() / n : 0;
  for (int i = 0; i < n; ++i) out.push_back(t.slice(i * each, each));
  return out;
}

int64_t rows_in(const Tensor& t) { return t.shape().empty() ? t.numel() : t.shape()[0]; }

int64_t part_elements(const Tensor& t, std::span<const int64_t> splits, int n, int i) {
  const int64_t rows = rows_in(t);
  const int64_t row = rows > 0 ? t.numel() / rows : 0;
  return (splits.empty() ? rows / n : splits[static_cast<size_t>(i)]) * row;
}

std::vector<Tensor> rows_of(const Tensor& t, std::span<const int64_t> splits, int n) {
  const int64_t rows = rows_in(t);
  const int64_t row = rows > 0 ? t.numel() / rows : 0;
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(n));
  int64_t at = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t x = splits.empty() ? rows / n : splits[static_cast<size_t>(i)];
    out.push_back(t.slice(at * row, x * row));
    at += x;
  }
  return out;
}

}  // namespace tdist
