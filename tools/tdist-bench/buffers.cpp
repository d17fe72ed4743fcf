#include "buffers.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tbench {

Buffer::Buffer(size_t bytes) : size_(bytes) {
  constexpr size_t kAlign = 4096;
  const size_t rounded = std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  void* p = std::aligned_alloc(kAlign, rounded);
  if (!p) throw std::bad_alloc();
  data_.reset(p);
}

void Buffer::Free::operator()(void* p) const { std::free(p); }

// ---- 16-bit floats -----------------------------------------------------------------------

uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) return sign | (ax > 0x7F800000u ? 0x7E00u : 0x7C00u);  // NaN, Inf
  if (ax >= 0x477FF000u) return sign | 0x7C00u;                                  // >= 65520: Inf
  if (ax < 0x38800000u) {  // below 2^-14: subnormal half, exact scaling then RNE
    const float scaled = std::bit_cast<float>(ax) * 16777216.0f;  // 2^24
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t h = ((ax >> 23) - 112u) << 10 | ((ax & 0x7FFFFFu) >> 13);
  const uint32_t rem = ax & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// ---- pattern -------------------------------------------------------------------------------

namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// Stores an integer-valued number in element i of an array of type dt. Integer
// types wrap (conversion to a narrower integer is modular in C++20).
void store(Dt dt, void* data, size_t i, int64_t iv, double dv) {
  switch (dt) {
    case Dt::Int8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(iv); break;
    case Dt::Uint8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(iv); break;
    case Dt::Int32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(iv); break;
    case Dt::Int64: static_cast<int64_t*>(data)[i] = iv; break;
    case Dt::Half: static_cast<uint16_t*>(data)[i] = float_to_half_bits(static_cast<float>(dv)); break;
    case Dt::BFloat16: static_cast<uint16_t*>(data)[i] = float_to_bf16_bits(static_cast<float>(dv)); break;
    case Dt::Float: static_cast<float*>(data)[i] = static_cast<float>(dv); break;
    case Dt::Double: static_cast<double*>(data)[i] = dv; break;
  }
}

template <typename T>
void fill_typed(T* out, size_t count, Op op, int rank, T (*conv)(int64_t)) {
  for (size_t i = 0; i < count; ++i) out[i] = conv(pattern_value(op, rank, i));
}

// The expectation of one element: exact integer (wrapping) and floating value.
struct Expect {
  int64_t i = 0;     // integer types: the value before the (modular) narrowing
  double d = 0;      // floating types
  bool tolerant = false;
};

// Reduction over ranks of the pattern at `index`, both as wrapping integer and
// as double (exact: small integers and powers of two).
Expect reduce_over_ranks(Dt dt, Op op, int n, uint64_t index) {
  uint64_t isum = 0, iprod = 1;
  int64_t imin = INT64_MAX, imax = INT64_MIN;
  double dsum = 0, dprod = 1;
  for (int r = 0; r < n; ++r) {
    const int64_t v = pattern_value(op, r, index);
    isum += static_cast<uint64_t>(v);
    iprod *= static_cast<uint64_t>(v);
    imin = std::min(imin, v);
    imax = std::max(imax, v);
    dsum += static_cast<double>(v);
    dprod *= static_cast<double>(v);
  }
  Expect e;
  switch (op) {
    case Op::Sum: e.i = static_cast<int64_t>(isum); e.d = dsum; break;
    case Op::Prod: e.i = static_cast<int64_t>(iprod); e.d = dprod; break;
    case Op::Min: e.i = imin; e.d = static_cast<double>(imin); break;
    case Op::Max: e.i = imax; e.d = static_cast<double>(imax); break;
    case Op::Avg: {
      // Integers: the sum wraps in the type, then truncating division (NCCL, tdist).
      int64_t wrapped = 0;
      switch (dt) {
        case Dt::Int8: wrapped = static_cast<int8_t>(isum); break;
        case Dt::Uint8: wrapped = static_cast<uint8_t>(isum); break;
        case Dt::Int32: wrapped = static_cast<int32_t>(isum); break;
        default: wrapped = static_cast<int64_t>(isum); break;
      }
      e.i = wrapped / n;
      e.d = dsum / n;
      e.tolerant = true;
      break;
    }
  }
  return e;
}

Expect single(Op op, int rank, uint64_t index) {
  Expect e;
  e.i = pattern_value(op, rank, index);
  e.d = static_cast<double>(e.i);
  return e;
}

// Element i of the result of `spec` on its rank.
Expect expected_at(const CheckSpec& s, size_t i) {
  const int n = s.world_size;
  const size_t chunk = n > 0 ? s.count / static_cast<size_t>(n) : 0;
  const Op op = is_reducing(s.coll) ? s.op : Op::Sum;
  switch (s.coll) {
    case Coll::AllReduce:
    case Coll::Reduce: return reduce_over_ranks(s.dt, op, n, i);
    case Coll::Broadcast: return single(op, s.root, i);
    case Coll::AllGather: return single(op, static_cast<int>(i / chunk), i % chunk);
    case Coll::ReduceScatter: return reduce_over_ranks(s.dt, op, n, s.rank * chunk + i);
    case Coll::AllToAll: return single(op, static_cast<int>(i / chunk), s.rank * chunk + i % chunk);
    case Coll::SendRecv: return single(op, 1 - s.rank, i);
    case Coll::Copy: return single(op, s.rank, i);
  }
  return {};
}

double tolerance(Dt dt) {
  switch (dt) {
    case Dt::Half:
    case Dt::BFloat16: return 1e-2;
    case Dt::Float: return 1e-5;
    case Dt::Double: return 1e-12;
    default: return 0;
  }
}

template <typename T>
int64_t count_int(const CheckSpec& s, const T* data, size_t n) {
  int64_t wrong = 0;
  for (size_t i = 0; i < n; ++i)
    if (data[i] != static_cast<T>(expected_at(s, i).i)) ++wrong;
  return wrong;
}

template <typename Load>
int64_t count_float(const CheckSpec& s, size_t n, Load load) {
  int64_t wrong = 0;
  Buffer one(sizeof(double));
  const double tol = tolerance(s.dt);
  for (size_t i = 0; i < n; ++i) {
    const Expect e = expected_at(s, i);
    const double actual = load(i);
    if (e.tolerant) {
      if (!(std::fabs(actual - e.d) <= tol * std::max(1.0, std::fabs(e.d)))) ++wrong;
    } else {
      // The exact value rounded to the type, compared as a value.
      store(s.dt, one.data(), 0, e.i, e.d);
      double want = 0;
      switch (s.dt) {
        case Dt::Half: want = half_bits_to_float(*static_cast<uint16_t*>(one.data())); break;
        case Dt::BFloat16: want = bf16_bits_to_float(*static_cast<uint16_t*>(one.data())); break;
        case Dt::Float: want = *static_cast<float*>(one.data()); break;
        default: want = e.d; break;
      }
      if (!(actual == want)) ++wrong;
    }
  }
  return wrong;
}

}  // namespace

int64_t pattern_value(Op op, int rank, uint64_t index) {
  const uint64_t h = mix((static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^ mix(index + 0x632BE59BD9B4E019ull));
  if (op == Op::Prod) return (h & 3) == 0 ? 2 : 1;
  return static_cast<int64_t>(h % 5);  // 0..4: sums stay exact in bfloat16 up to 64 ranks
}

void fill_pattern(Dt dt, Op op, int rank, void* data, size_t count) {
  switch (dt) {
    case Dt::Int8: fill_typed<int8_t>(static_cast<int8_t*>(data), count, op, rank, [](int64_t v) { return static_cast<int8_t>(v); }); break;
    case Dt::Uint8: fill_typed<uint8_t>(static_cast<uint8_t*>(data), count, op, rank, [](int64_t v) { return static_cast<uint8_t>(v); }); break;
    case Dt::Int32: fill_typed<int32_t>(static_cast<int32_t*>(data), count, op, rank, [](int64_t v) { return static_cast<int32_t>(v); }); break;
    case Dt::Int64: fill_typed<int64_t>(static_cast<int64_t*>(data), count, op, rank, [](int64_t v) { return v; }); break;
    case Dt::Half: fill_typed<uint16_t>(static_cast<uint16_t*>(data), count, op, rank, [](int64_t v) { return float_to_half_bits(static_cast<float>(v)); }); break;
    case Dt::BFloat16: fill_typed<uint16_t>(static_cast<uint16_t*>(data), count, op, rank, [](int64_t v) { return float_to_bf16_bits(static_cast<float>(v)); }); break;
    case Dt::Float: fill_typed<float>(static_cast<float*>(data), count, op, rank, [](int64_t v) { return static_cast<float>(v); }); break;
    case Dt::Double: fill_typed<double>(static_cast<double*>(data), count, op, rank, [](int64_t v) { return static_cast<double>(v); }); break;
  }
}

void poison(void* data, size_t bytes) {
  if (bytes > 0) std::memset(data, 0xA5, bytes);
}

size_t result_count(Coll c, size_t count, int n, int rank, int root) {
  switch (c) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::AllGather:
    case Coll::AllToAll:
    case Coll::Copy: return count;
    case Coll::Reduce: return rank == root ? count : 0;
    case Coll::ReduceScatter: return n > 0 ? count / static_cast<size_t>(n) : 0;
    case Coll::SendRecv: return rank < 2 ? count : 0;
  }
  return 0;
}

int64_t count_wrong(const CheckSpec& s, const void* result, size_t n) {
  if (n == 0) return 0;
  switch (s.dt) {
    case Dt::Int8: return count_int(s, static_cast<const int8_t*>(result), n);
    case Dt::Uint8: return count_int(s, static_cast<const uint8_t*>(result), n);
    case Dt::Int32: return count_int(s, static_cast<const int32_t*>(result), n);
    case Dt::Int64: return count_int(s, static_cast<const int64_t*>(result), n);
    case Dt::Half: {
      auto p = static_cast<const uint16_t*>(result);
      return count_float(s, n, [p](size_t i) { return static_cast<double>(half_bits_to_float(p[i])); });
    }
    case Dt::BFloat16: {
      auto p = static_cast<const uint16_t*>(result);
      return count_float(s, n, [p](size_t i) { return static_cast<double>(bf16_bits_to_float(p[i])); });
    }
    case Dt::Float: {
      auto p = static_cast<const float*>(result);
      return count_float(s, n, [p](size_t i) { return static_cast<double>(p[i]); });
    }
    case Dt::Double: {
      auto p = static_cast<const double*>(result);
      return count_float(s, n, [p](size_t i) { return p[i]; });
    }
  }
  return 0;
}

}  // namespace tbench
