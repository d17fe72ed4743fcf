// The reduction kernels: templates over element type and op functor, instantiated into one
// table of (ReduceOp x DType) function pointers. Each kernel is a plain indexed loop over
// __restrict pointers with no branch on op or dtype inside, so GCC vectorizes it (this file
// is built with -O3; see src/CMakeLists.txt). Check with -fopt-info-vec-optimized.
//
// On x86-64 every kernel is also compiled for AVX2 (target_clones: the loader picks the clone
// once, through an ifunc), and float16 blocks are converted with F16C when the CPU has it.
#include "reduce/reduction_kernels.h"

#include <atomic>
#include <complex>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "tdist/errors.h"
#include "tensor/half.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#include <immintrin.h>
#define TDIST_X86_DISPATCH 1
// AVX2, not x86-64-v3: no FMA, so that nothing can contract the float16 rounding steps.
#define TDIST_MULTIVERSION [[gnu::target_clones("avx2", "default")]]
#else
#define TDIST_MULTIVERSION
#endif

namespace tdist::reduction {

namespace {

// ---- element operations -------------------------------------------------------------------

// Integer arithmetic goes through an unsigned type at least as wide as unsigned int, so that
// overflow wraps (signed overflow, and uint16 * uint16 promoted to int, would be undefined).
template <typename T>
using WideUnsigned = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T>;

struct Sum {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WideUnsigned<T>>(a) + static_cast<WideUnsigned<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct Product {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WideUnsigned<T>>(a) * static_cast<WideUnsigned<T>>(b));
    } else {
      return a * b;
    }
  }
};

// NaN-propagating, branch-free (compiles to compare + blend): a NaN `a` wins through the
// self-inequality test, a NaN `b` through the failed ordered comparison.
struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) {
      return (a < b || a != a) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) {
      return (a > b || a != a) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

struct BitAnd {
  template <typename T>
  T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BitOr {
  template <typename T>
  T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BitXor {
  template <typename T>
  T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};

// bool is stored as one byte; any non-zero byte is true, results are 0 or 1.
struct LogicalAnd {
  uint8_t operator()(uint8_t a, uint8_t b) const { return static_cast<uint8_t>((a != 0) & (b != 0)); }
};
struct LogicalOr {
  uint8_t operator()(uint8_t a, uint8_t b) const { return static_cast<uint8_t>((a != 0) | (b != 0)); }
};
struct LogicalXor {
  uint8_t operator()(uint8_t a, uint8_t b) const { return static_cast<uint8_t>((a != 0) ^ (b != 0)); }
};

// ---- loops --------------------------------------------------------------------------------

template <typename T, typename Op>
void loop_acc(T* __restrict acc, const T* __restrict in, size_t n) {
  const Op op;
  for (size_t i = 0; i < n; ++i) acc[i] = op(acc[i], in[i]);
}

// acc[i] = in[i] op acc[i]: keeps the operand order when out aliases the second input.
template <typename T, typename Op>
void loop_acc_rev(T* __restrict acc, const T* __restrict in, size_t n) {
  const Op op;
  for (size_t i = 0; i < n; ++i) acc[i] = op(in[i], acc[i]);
}

template <typename T, typename Op>
void loop_out(T* __restrict out, const T* __restrict a, const T* __restrict b, size_t n) {
  const Op op;
  for (size_t i = 0; i < n; ++i) out[i] = op(a[i], b[i]);
}

using CombineFn = void (*)(void* out, const void* a, const void* b, size_t n);

// The aliasing cases get their own loops so that every loop keeps __restrict honest.
template <typename T, typename Op>
TDIST_MULTIVERSION void combine_kernel(void* out_v, const void* a_v, const void* b_v, size_t n) {
  auto* out = static_cast<T*>(out_v);
  const auto* a = static_cast<const T*>(a_v);
  const auto* b = static_cast<const T*>(b_v);
  if (out == a) {
    loop_acc<T, Op>(out, b, n);
  } else if (out == b) {
    loop_acc_rev<T, Op>(out, a, n);
  } else {
    loop_out<T, Op>(out, a, b, n);
  }
}

// float16 / bfloat16: blocks converted to float, reduced, rounded back.
constexpr size_t kBlock = 256;

template <float (*F)(uint16_t)>
void widen_loop(float* __restrict dst, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = F(src[i]);
}

template <uint16_t (*F)(float)>
void narrow_loop(uint16_t* __restrict dst, const float* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = F(src[i]);
}

#ifdef TDIST_X86_DISPATCH
// F16C converts 8 values per instruction; round to nearest even, NaN stays NaN.
[[gnu::target("avx,f16c")]] void widen_f16c(float* dst, const uint16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

[[gnu::target("avx,f16c")]] void narrow_f16c(uint16_t* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

bool cpu_has_f16c() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}
const bool kCpuHasF16C = cpu_has_f16c();
std::atomic<bool> g_use_f16c{kCpuHasF16C};
#endif

struct HalfConv {
  static void widen(float* dst, const uint16_t* src, size_t n) {
#ifdef TDIST_X86_DISPATCH
    if (g_use_f16c.load(std::memory_order_relaxed)) return widen_f16c(dst, src, n);
#endif
    widen_loop<detail::half_bits_to_float>(dst, src, n);
  }
  static void narrow(uint16_t* dst, const float* src, size_t n) {
#ifdef TDIST_X86_DISPATCH
    if (g_use_f16c.load(std::memory_order_relaxed)) return narrow_f16c(dst, src, n);
#endif
    narrow_loop<detail::float_to_half_bits>(dst, src, n);
  }
};

struct BFloat16Conv {
  static void widen(float* dst, const uint16_t* src, size_t n) {
    widen_loop<detail::bfloat16_bits_to_float>(dst, src, n);
  }
  static void narrow(uint16_t* dst, const float* src, size_t n) {
    narrow_loop<detail::float_to_bfloat16_bits>(dst, src, n);
  }
};

template <typename Conv, typename Op>
TDIST_MULTIVERSION void combine_half_kernel(void* out_v, const void* a_v, const void* b_v, size_t n) {
  auto* out = static_cast<uint16_t*>(out_v);
  const auto* a = static_cast<const uint16_t*>(a_v);
  const auto* b = static_cast<const uint16_t*>(b_v);
  alignas(64) float fa[kBlock];
  alignas(64) float fb[kBlock];
  // Each block reads a and b completely before writing out, so out may be a or b.
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = n - base < kBlock ? n - base : kBlock;
    Conv::widen(fa, a + base, m);
    Conv::widen(fb, b + base, m);
    loop_acc<float, Op>(fa, fb, m);
    Conv::narrow(out + base, fa, m);
  }
}

// ---- finalize -----------------------------------------------------------------------------

using AvgFn = void (*)(void* data, size_t n, int contributors);
using ScaleFn = void (*)(void* data, size_t n, double factor);

template <typename T>
TDIST_MULTIVERSION void avg_kernel(void* data_v, size_t n, int contributors) {
  auto* __restrict data = static_cast<T*>(data_v);
  if constexpr (std::is_integral_v<T>) {
    // Truncating division, like NCCL; in int64 so that contributors never overflows T.
    const int64_t c = contributors;
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(static_cast<int64_t>(data[i]) / c);
  } else if constexpr (kIsFloat<T>) {
    const T c = static_cast<T>(contributors);
    for (size_t i = 0; i < n; ++i) data[i] = data[i] / c;
  } else {  // complex
    const typename T::value_type c = static_cast<typename T::value_type>(contributors);
    for (size_t i = 0; i < n; ++i) data[i] = data[i] / c;
  }
}

template <typename T>
TDIST_MULTIVERSION void premul_kernel(void* data_v, size_t n, double factor) {
  auto* __restrict data = static_cast<T*>(data_v);
  if constexpr (kIsFloat<T>) {
    const T f = static_cast<T>(factor);
    for (size_t i = 0; i < n; ++i) data[i] = data[i] * f;
  } else {  // complex
    const typename T::value_type f = static_cast<typename T::value_type>(factor);
    for (size_t i = 0; i < n; ++i) data[i] = data[i] * f;
  }
}

template <typename Conv>
TDIST_MULTIVERSION void avg_half_kernel(void* data_v, size_t n, int contributors) {
  auto* data = static_cast<uint16_t*>(data_v);
  const float c = static_cast<float>(contributors);
  alignas(64) float buf[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = n - base < kBlock ? n - base : kBlock;
    Conv::widen(buf, data + base, m);
    for (size_t i = 0; i < m; ++i) buf[i] = buf[i] / c;
    Conv::narrow(data + base, buf, m);
  }
}

template <typename Conv>
TDIST_MULTIVERSION void premul_half_kernel(void* data_v, size_t n, double factor) {
  auto* data = static_cast<uint16_t*>(data_v);
  const float f = static_cast<float>(factor);
  alignas(64) float buf[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = n - base < kBlock ? n - base : kBlock;
    Conv::widen(buf, data + base, m);
    for (size_t i = 0; i < m; ++i) buf[i] = buf[i] * f;
    Conv::narrow(data + base, buf, m);
  }
}

// ---- the table ----------------------------------------------------------------------------

constexpr int kNumOps = ReduceOp::PREMUL_SUM + 1;

struct Table {
  CombineFn combine[kNumOps][kNumDTypes] = {};
  AvgFn avg[kNumDTypes] = {};
  ScaleFn premul[kNumDTypes] = {};
};

constexpr int idx(DType d) { return static_cast<int>(d); }

// Integers: every op; AVG sums, then divides in finalize.
template <typename T>
constexpr void add_integer(Table& t, DType d) {
  t.combine[ReduceOp::SUM][idx(d)] = &combine_kernel<T, Sum>;
  t.combine[ReduceOp::AVG][idx(d)] = &combine_kernel<T, Sum>;
  t.combine[ReduceOp::PRODUCT][idx(d)] = &combine_kernel<T, Product>;
  t.combine[ReduceOp::MIN][idx(d)] = &combine_kernel<T, Min>;
  t.combine[ReduceOp::MAX][idx(d)] = &combine_kernel<T, Max>;
  t.combine[ReduceOp::BAND][idx(d)] = &combine_kernel<T, BitAnd>;
  t.combine[ReduceOp::BOR][idx(d)] = &combine_kernel<T, BitOr>;
  t.combine[ReduceOp::BXOR][idx(d)] = &combine_kernel<T, BitXor>;
  t.avg[idx(d)] = &avg_kernel<T>;
}

template <typename T>
constexpr void add_float(Table& t, DType d) {
  t.combine[ReduceOp::SUM][idx(d)] = &combine_kernel<T, Sum>;
  t.combine[ReduceOp::AVG][idx(d)] = &combine_kernel<T, Sum>;
  t.combine[ReduceOp::PREMUL_SUM][idx(d)] = &combine_kernel<T, Sum>;
  t.combine[ReduceOp::PRODUCT][idx(d)] = &combine_kernel<T, Product>;
  t.combine[ReduceOp::MIN][idx(d)] = &combine_kernel<T, Min>;
  t.combine[ReduceOp::MAX][idx(d)] = &combine_kernel<T, Max>;
  t.avg[idx(d)] = &avg_kernel<T>;
  t.premul[idx(d)] = &premul_kernel<T>;
}

template <typename Conv>
constexpr void add_half(Table& t, DType d) {
  t.combine[ReduceOp::SUM][idx(d)] = &combine_half_kernel<Conv, Sum>;
  t.combine[ReduceOp::AVG][idx(d)] = &combine_half_kernel<Conv, Sum>;
  t.combine[ReduceOp::PREMUL_SUM][idx(d)] = &combine_half_kernel<Conv, Sum>;
  t.combine[ReduceOp::PRODUCT][idx(d)] = &combine_half_kernel<Conv, Product>;
  t.combine[ReduceOp::MIN][idx(d)] = &combine_half_kernel<Conv, Min>;
  t.combine[ReduceOp::MAX][idx(d)] = &combine_half_kernel<Conv, Max>;
  t.avg[idx(d)] = &avg_half_kernel<Conv>;
  t.premul[idx(d)] = &premul_half_kernel<Conv>;
}

template <typename T>
constexpr void add_complex(Table& t, DType d) {
  t.combine[ReduceOp::SUM][idx(d)] = &combine_kernel<T, Sum>;
  t.combine[ReduceOp::AVG][idx(d)] = &combine_kernel<T, Sum>;
  t.combine[ReduceOp::PREMUL_SUM][idx(d)] = &combine_kernel<T, Sum>;
  t.combine[ReduceOp::PRODUCT][idx(d)] = &combine_kernel<T, Product>;
  t.avg[idx(d)] = &avg_kernel<T>;
  t.premul[idx(d)] = &premul_kernel<T>;
}

constexpr void add_bool(Table& t) {
  const int d = idx(DType::Bool);
  t.combine[ReduceOp::SUM][d] = &combine_kernel<uint8_t, LogicalOr>;
  t.combine[ReduceOp::PRODUCT][d] = &combine_kernel<uint8_t, LogicalAnd>;
  t.combine[ReduceOp::MIN][d] = &combine_kernel<uint8_t, LogicalAnd>;
  t.combine[ReduceOp::MAX][d] = &combine_kernel<uint8_t, LogicalOr>;
  t.combine[ReduceOp::BAND][d] = &combine_kernel<uint8_t, LogicalAnd>;
  t.combine[ReduceOp::BOR][d] = &combine_kernel<uint8_t, LogicalOr>;
  t.combine[ReduceOp::BXOR][d] = &combine_kernel<uint8_t, LogicalXor>;
}

constexpr Table make_table() {
  Table t;
  add_bool(t);
  add_integer<uint8_t>(t, DType::UInt8);
  add_integer<int8_t>(t, DType::Int8);
  add_integer<int16_t>(t, DType::Int16);
  add_integer<int32_t>(t, DType::Int32);
  add_integer<int64_t>(t, DType::Int64);
  add_half<HalfConv>(t, DType::Float16);
  add_half<BFloat16Conv>(t, DType::BFloat16);
  add_float<float>(t, DType::Float32);
  add_float<double>(t, DType::Float64);
  add_complex<std::complex<float>>(t, DType::Complex64);
  add_complex<std::complex<double>>(t, DType::Complex128);
  return t;
}

constexpr Table kTable = make_table();

// The table must agree with reduce_op_supported (tests/reduce checks every combination).

CombineFn lookup(ReduceOp op, DType dtype, const char* what) {
  check_reduce_op(op, dtype, what);  // also rejects invalid codes
  CombineFn fn = kTable.combine[op.kind()][idx(dtype)];
  if (fn == nullptr) {  // unreachable while the table matches reduce_op_supported
    throw DistValueError(std::string(what) + ": no kernel for ReduceOp " + std::string(op.name()) + " on " +
                         std::string(dtype_name(dtype)));
  }
  return fn;
}

void check_pointers(const char* what, size_t count, std::initializer_list<const void*> ptrs) {
  if (count == 0) return;
  for (const void* p : ptrs) {
    if (p == nullptr) {
      throw DistValueError(std::string(what) + ": null buffer for " + std::to_string(count) + " elements");
    }
  }
}

void check_same(const char* what, const Tensor& x, const Tensor& y) {
  if (x.dtype() != y.dtype() || x.numel() != y.numel() || !x.is_cpu() || !y.is_cpu()) {
    throw DistValueError(std::string(what) + ": tensors must be CPU tensors of the same dtype and size, got " +
                         x.str() + " and " + y.str());
  }
}

}  // namespace

void combine(ReduceOp op, DType dtype, void* out, const void* a, const void* b, size_t count) {
  CombineFn fn = lookup(op, dtype, "reduction::combine");
  check_pointers("reduction::combine", count, {out, a, b});
  if (count == 0) return;
  fn(out, a, b, count);
}

void accumulate(ReduceOp op, DType dtype, void* acc, const void* in, size_t count) {
  CombineFn fn = lookup(op, dtype, "reduction::accumulate");
  check_pointers("reduction::accumulate", count, {acc, in});
  if (count == 0) return;
  fn(acc, acc, in, count);
}

void finalize(ReduceOp op, DType dtype, void* data, size_t count, int contributors) {
  lookup(op, dtype, "reduction::finalize");
  switch (op.kind()) {
    case ReduceOp::AVG:
      if (contributors <= 0) {
        throw DistValueError("reduction::finalize: AVG over " + std::to_string(contributors) +
                             " contributors (must be positive)");
      }
      check_pointers("reduction::finalize", count, {data});
      if (count > 0) kTable.avg[idx(dtype)](data, count, contributors);
      return;
    case ReduceOp::PREMUL_SUM:
      check_pointers("reduction::finalize", count, {data});
      if (count > 0) kTable.premul[idx(dtype)](data, count, op.factor());
      return;
    default:
      return;
  }
}

void accumulate(ReduceOp op, const Tensor& acc, const Tensor& in) {
  check_same("reduction::accumulate", acc, in);
  accumulate(op, acc.dtype(), acc.data(), in.data(), static_cast<size_t>(acc.numel()));
}

void combine(ReduceOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  check_same("reduction::combine", out, a);
  check_same("reduction::combine", out, b);
  combine(op, out.dtype(), out.data(), a.data(), b.data(), static_cast<size_t>(out.numel()));
}

void finalize(ReduceOp op, const Tensor& data, int contributors) {
  if (!data.is_cpu()) throw DistValueError("reduction::finalize: " + data.str() + " is not a CPU tensor");
  finalize(op, data.dtype(), data.data(), static_cast<size_t>(data.numel()), contributors);
}

namespace internal {

const char* float16_conversion() {
#ifdef TDIST_X86_DISPATCH
  if (g_use_f16c.load(std::memory_order_relaxed)) return "f16c";
#endif
  return "portable";
}

void set_float16_f16c(bool enabled) {
#ifdef TDIST_X86_DISPATCH
  g_use_f16c.store(enabled && kCpuHasF16C, std::memory_order_relaxed);
#else
  (void)enabled;
#endif
}

}  // namespace internal

}  // namespace tdist::reduction
