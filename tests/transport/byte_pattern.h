// Recognizable message contents for the transport tests: a byte that moved,
// was lost or came from the wrong message shows as a mismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tdist/tensor.h"

namespace tdist::testing {

inline std::vector<uint8_t> pattern(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 13 + seed * 101 + (i >> 9));
  return v;
}

inline Tensor bytes(std::vector<uint8_t>& v) { return Tensor(v.data(), static_cast<int64_t>(v.size())); }

}  // namespace tdist::testing
