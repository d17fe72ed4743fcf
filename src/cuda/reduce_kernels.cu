// The reduction kernels on CUDA devices: one kernel template per (element type, op) for
// combine (accumulate is combine of {acc, in} into acc) and one per element type for
// finalize, picked by one switch over dtype x op (dispatch below). Semantics: reduce_kernels.h.
//
// Every kernel is a grid-stride loop over "units": the elements before the first 16-byte
// boundary, then 16-byte vectors, then the elements after the last one. The host splits the
// range so that every pointer is on a 16-byte boundary where the vectors start; when the
// pointers are misaligned differently (a tensor at an odd offset), there are no vectors and
// every unit is one element.
//
// The element operations avoid FMA contraction explicitly (__fmul_rn and friends) where a
// product meets a sum (complex multiplication): the CPU kernels do not contract, and the
// results must be the same bits.
#include "cuda/reduce_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace tdist::device::kernels {

namespace {

constexpr int kThreads = 512;
constexpr size_t kVectorBytes = 16;

// ---- element types ------------------------------------------------------------------------

// float16 and bfloat16 as their bits: arithmetic goes through float (Through below).
struct HalfBits {
  uint16_t bits;
};
struct BFloat16Bits {
  uint16_t bits;
};

// Aligned like std::complex (to F): a complex128 tensor may start 8 bytes past a 16-byte
// boundary; such ranges get no vector units (shape_of).
template <typename F>
struct Complex {
  F re;
  F im;
};

// Integer arithmetic through an unsigned type at least as wide as unsigned int, so that
// overflow wraps (as src/reduce/reduction_kernels.cpp does).
template <typename T>
using WideUnsigned = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }

// ---- element operations (the functors of src/reduce/reduction_kernels.cpp) ------------

struct Sum {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WideUnsigned<T>>(a) + static_cast<WideUnsigned<T>>(b));
    } else {
      return a + b;
    }
  }
  template <typename F>
  __device__ __forceinline__ Complex<F> operator()(Complex<F> a, Complex<F> b) const {
    return {a.re + b.re, a.im + b.im};
  }
};

// The C99 Annex G product (what std::complex's operator* does with GCC): the plain formula,
// and when both parts come out NaN, infinities are recovered from infinite operands.
template <typename F>
__device__ Complex<F> annex_g_product(F a, F b, F c, F d) {
  const F ac = mul_rn(a, c), bd = mul_rn(b, d), ad = mul_rn(a, d), bc = mul_rn(b, c);
  F x = sub_rn(ac, bd);
  F y = add_rn(ad, bc);
  if (isnan(x) && isnan(y)) {
    bool recalc = false;
    if (isinf(a) || isinf(b)) {  // the first operand is infinite
      a = copysign(isinf(a) ? F(1) : F(0), a);
      b = copysign(isinf(b) ? F(1) : F(0), b);
      if (isnan(c)) c = copysign(F(0), c);
      if (isnan(d)) d = copysign(F(0), d);
      recalc = true;
    }
    if (isinf(c) || isinf(d)) {  // the second operand is infinite
      c = copysign(isinf(c) ? F(1) : F(0), c);
      d = copysign(isinf(d) ? F(1) : F(0), d);
      if (isnan(a)) a = copysign(F(0), a);
      if (isnan(b)) b = copysign(F(0), b);
      recalc = true;
    }
    if (!recalc && (isinf(ac) || isinf(bd) || isinf(ad) || isinf(bc))) {  // overflow in the products
      if (isnan(a)) a = copysign(F(0), a);
      if (isnan(b)) b = copysign(F(0), b);
      if (isnan(c)) c = copysign(F(0), c);
      if (isnan(d)) d = copysign(F(0), d);
      recalc = true;
    }
    if (recalc) {
      const F inf = F(INFINITY);
      x = mul_rn(inf, sub_rn(mul_rn(a, c), mul_rn(b, d)));
      y = mul_rn(inf, add_rn(mul_rn(a, d), mul_rn(b, c)));
    }
  }
  return {x, y};
}

struct Product {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WideUnsigned<T>>(a) * static_cast<WideUnsigned<T>>(b));
    } else {
      return mul_rn(a, b);
    }
  }
  template <typename F>
  __device__ __forceinline__ Complex<F> operator()(Complex<F> a, Complex<F> b) const {
    return annex_g_product(a.re, a.im, b.re, b.im);
  }
};

// NaN-propagating like torch.minimum/maximum: a NaN `a` wins through the self-inequality
// test, a NaN `b` through the failed ordered comparison; for equal inputs, `b`.
struct Min {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return (a < b || a != a) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

struct Max {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return (a > b || a != a) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

struct BitAnd {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BitOr {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BitXor {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};

// bool is one byte; any non-zero byte is true, results are 0 or 1.
struct LogicalAnd {
  __device__ __forceinline__ uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) & (b != 0); }
};
struct LogicalOr {
  __device__ __forceinline__ uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) | (b != 0); }
};
struct LogicalXor {
  __device__ __forceinline__ uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) ^ (b != 0); }
};

// float16 / bfloat16: widen to float (exact), apply, round to nearest even.
__device__ __forceinline__ float to_float(HalfBits h) { return __half2float(__ushort_as_half(h.bits)); }
__device__ __forceinline__ float to_float(BFloat16Bits h) { return __bfloat162float(__ushort_as_bfloat16(h.bits)); }
template <typename H>
__device__ __forceinline__ H from_float(float f) {
  if constexpr (std::is_same_v<H, HalfBits>) {
    return {__half_as_ushort(__float2half_rn(f))};
  } else {
    return {__bfloat16_as_ushort(__float2bfloat16_rn(f))};
  }
}

template <typename Op>
struct Through {
  template <typename H>
  __device__ __forceinline__ H operator()(H a, H b) const {
    return from_float<H>(Op()(to_float(a), to_float(b)));
  }
};

// ---- finalize operations --------------------------------------------------------------------

// data / contributors: integers truncate (in int64, so that contributors never overflows T).
struct DivideBy {
  int contributors;
  template <typename T>
  __device__ __forceinline__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(contributors));
    } else {
      return x / static_cast<T>(contributors);
    }
  }
  template <typename F>
  __device__ __forceinline__ Complex<F> operator()(Complex<F> x) const {
    const F c = static_cast<F>(contributors);
    return {x.re / c, x.im / c};
  }
  __device__ __forceinline__ HalfBits operator()(HalfBits x) const {
    return from_float<HalfBits>(to_float(x) / static_cast<float>(contributors));
  }
  __device__ __forceinline__ BFloat16Bits operator()(BFloat16Bits x) const {
    return from_float<BFloat16Bits>(to_float(x) / static_cast<float>(contributors));
  }
};

// data * factor, the factor converted to the element's real type first (as the CPU does).
struct MultiplyBy {
  double factor;
  template <typename T>
  __device__ __forceinline__ T operator()(T x) const { return mul_rn(x, static_cast<T>(factor)); }
  template <typename F>
  __device__ __forceinline__ Complex<F> operator()(Complex<F> x) const {
    const F f = static_cast<F>(factor);
    return {mul_rn(x.re, f), mul_rn(x.im, f)};
  }
  __device__ __forceinline__ HalfBits operator()(HalfBits x) const {
    return from_float<HalfBits>(mul_rn(to_float(x), static_cast<float>(factor)));
  }
  __device__ __forceinline__ BFloat16Bits operator()(BFloat16Bits x) const {
    return from_float<BFloat16Bits>(mul_rn(to_float(x), static_cast<float>(factor)));
  }
};

// ---- the range split and the kernels --------------------------------------------------------

template <typename T>
struct Vector {
  static constexpr int kPer = kVectorBytes / sizeof(T);
  union {
    uint4 raw;
    T e[kPer];
  };
};

struct Inputs {
  const void* p[kMaxCombineInputs];
};

// The element index of scalar unit u (u not in the vector range).
__device__ __forceinline__ size_t scalar_index(size_t u, size_t head, size_t vectors, size_t per) {
  return u < head ? u : u - vectors + vectors * per;
}

// `out` is not __restrict__: it may be one of the inputs.
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    combine_kernel(T* out, Inputs ins, int n, size_t head, size_t vectors, size_t units) {
  constexpr int kPer = Vector<T>::kPer;
  const Op op;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t u = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    if (u >= head && u - head < vectors) {
      const size_t first = head + (u - head) * kPer;
      Vector<T> acc;
      acc.raw = *reinterpret_cast<const uint4*>(static_cast<const T*>(ins.p[0]) + first);
      for (int k = 1; k < n; ++k) {
        Vector<T> x;
        x.raw = *reinterpret_cast<const uint4*>(static_cast<const T*>(ins.p[k]) + first);
#pragma unroll
        for (int j = 0; j < kPer; ++j) acc.e[j] = op(acc.e[j], x.e[j]);
      }
      *reinterpret_cast<uint4*>(out + first) = acc.raw;
    } else {
      const size_t i = scalar_index(u, head, vectors, kPer);
      T acc = static_cast<const T*>(ins.p[0])[i];
      for (int k = 1; k < n; ++k) acc = op(acc, static_cast<const T*>(ins.p[k])[i]);
      out[i] = acc;
    }
  }
}

template <typename T, typename Fn>
__global__ void __launch_bounds__(kThreads)
    finalize_kernel(T* __restrict__ data, Fn fn, size_t head, size_t vectors, size_t units) {
  constexpr int kPer = Vector<T>::kPer;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t u = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    if (u >= head && u - head < vectors) {
      const size_t first = head + (u - head) * kPer;
      Vector<T> x;
      x.raw = *reinterpret_cast<const uint4*>(data + first);
#pragma unroll
      for (int j = 0; j < kPer; ++j) x.e[j] = fn(x.e[j]);
      *reinterpret_cast<uint4*>(data + first) = x.raw;
    } else {
      const size_t i = scalar_index(u, head, vectors, kPer);
      data[i] = fn(data[i]);
    }
  }
}

// ---- launching --------------------------------------------------------------------------------

struct Shape {
  size_t head = 0;
  size_t vectors = 0;
  size_t units = 0;
  unsigned blocks = 0;
};

// Splits `count` elements of `elem` bytes at the pointers' common 16-byte boundary (none
// when they are misaligned differently) and sizes the grid.
Shape shape_of(size_t count, size_t elem, const void* const* ptrs, int n_ptrs, int max_blocks) {
  Shape s;
  const uintptr_t misalign = reinterpret_cast<uintptr_t>(ptrs[0]) % kVectorBytes;
  bool common = misalign % elem == 0;
  for (int k = 1; k < n_ptrs && common; ++k) common = reinterpret_cast<uintptr_t>(ptrs[k]) % kVectorBytes == misalign;
  const size_t per = kVectorBytes / elem;
  if (common) {
    s.head = misalign == 0 ? 0 : (kVectorBytes - misalign) / elem;
    if (s.head > count) s.head = count;
    s.vectors = (count - s.head) / per;
  }
  s.units = count - s.vectors * per + s.vectors;
  const size_t wanted = (s.units + kThreads - 1) / kThreads;
  const size_t cap = max_blocks > 0 ? static_cast<size_t>(max_blocks) : 1;
  s.blocks = static_cast<unsigned>(wanted < cap ? wanted : cap);
  return s;
}

template <typename T, typename Op>
cudaError_t combine_as(void* out, const void* const* ins, int n, size_t count, int max_blocks, cudaStream_t stream) {
  Inputs in{};
  const void* ptrs[kMaxCombineInputs + 1];
  ptrs[0] = out;
  for (int k = 0; k < n; ++k) {
    in.p[k] = ins[k];
    ptrs[k + 1] = ins[k];
  }
  const Shape s = shape_of(count, sizeof(T), ptrs, n + 1, max_blocks);
  combine_kernel<T, Op><<<s.blocks, kThreads, 0, stream>>>(static_cast<T*>(out), in, n, s.head, s.vectors, s.units);
  return cudaGetLastError();
}

template <typename T, typename Fn>
cudaError_t finalize_as(void* data, Fn fn, size_t count, int max_blocks, cudaStream_t stream) {
  const void* ptrs[1] = {data};
  const Shape s = shape_of(count, sizeof(T), ptrs, 1, max_blocks);
  finalize_kernel<T, Fn><<<s.blocks, kThreads, 0, stream>>>(static_cast<T*>(data), fn, s.head, s.vectors, s.units);
  return cudaGetLastError();
}

// Integers: every op but PREMUL_SUM; AVG sums (finalize divides).
template <typename T>
cudaError_t combine_integer(ReduceOp::Kind op, void* out, const void* const* ins, int n, size_t count, int blocks,
                            cudaStream_t stream) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return combine_as<T, Sum>(out, ins, n, count, blocks, stream);
    case ReduceOp::PRODUCT: return combine_as<T, Product>(out, ins, n, count, blocks, stream);
    case ReduceOp::MIN: return combine_as<T, Min>(out, ins, n, count, blocks, stream);
    case ReduceOp::MAX: return combine_as<T, Max>(out, ins, n, count, blocks, stream);
    case ReduceOp::BAND: return combine_as<T, BitAnd>(out, ins, n, count, blocks, stream);
    case ReduceOp::BOR: return combine_as<T, BitOr>(out, ins, n, count, blocks, stream);
    case ReduceOp::BXOR: return combine_as<T, BitXor>(out, ins, n, count, blocks, stream);
    default: return cudaErrorInvalidValue;
  }
}

// Floating types (T = float, double, or the 16-bit bits with Wrap = Through).
template <typename T, template <typename> class Wrap>
cudaError_t combine_floating(ReduceOp::Kind op, void* out, const void* const* ins, int n, size_t count, int blocks,
                             cudaStream_t stream) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
    case ReduceOp::PREMUL_SUM: return combine_as<T, Wrap<Sum>>(out, ins, n, count, blocks, stream);
    case ReduceOp::PRODUCT: return combine_as<T, Wrap<Product>>(out, ins, n, count, blocks, stream);
    case ReduceOp::MIN: return combine_as<T, Wrap<Min>>(out, ins, n, count, blocks, stream);
    case ReduceOp::MAX: return combine_as<T, Wrap<Max>>(out, ins, n, count, blocks, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename Op>
using Direct = Op;

template <typename F>
cudaError_t combine_complex(ReduceOp::Kind op, void* out, const void* const* ins, int n, size_t count, int blocks,
                            cudaStream_t stream) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
    case ReduceOp::PREMUL_SUM: return combine_as<Complex<F>, Sum>(out, ins, n, count, blocks, stream);
    case ReduceOp::PRODUCT: return combine_as<Complex<F>, Product>(out, ins, n, count, blocks, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t combine_bool(ReduceOp::Kind op, void* out, const void* const* ins, int n, size_t count, int blocks,
                         cudaStream_t stream) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::MAX:
    case ReduceOp::BOR: return combine_as<uint8_t, LogicalOr>(out, ins, n, count, blocks, stream);
    case ReduceOp::PRODUCT:
    case ReduceOp::MIN:
    case ReduceOp::BAND: return combine_as<uint8_t, LogicalAnd>(out, ins, n, count, blocks, stream);
    case ReduceOp::BXOR: return combine_as<uint8_t, LogicalXor>(out, ins, n, count, blocks, stream);
    default: return cudaErrorInvalidValue;
  }
}

// AVG on every type but bool; PREMUL_SUM on floating and complex types.
template <typename T>
cudaError_t finalize_typed(ReduceOp op, void* data, size_t count, int contributors, int blocks, cudaStream_t stream) {
  if (op.kind() == ReduceOp::AVG) return finalize_as<T>(data, DivideBy{contributors}, count, blocks, stream);
  if constexpr (!std::is_integral_v<T>) {
    if (op.kind() == ReduceOp::PREMUL_SUM) return finalize_as<T>(data, MultiplyBy{op.factor()}, count, blocks, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_combine(ReduceOp op, DType dtype, void* out, const void* const* ins, int n, size_t count,
                           int max_blocks, cudaStream_t stream) {
  if (n < 1 || n > kMaxCombineInputs) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  const ReduceOp::Kind k = op.kind();
  switch (dtype) {
    case DType::Bool: return combine_bool(k, out, ins, n, count, max_blocks, stream);
    case DType::UInt8: return combine_integer<uint8_t>(k, out, ins, n, count, max_blocks, stream);
    case DType::Int8: return combine_integer<int8_t>(k, out, ins, n, count, max_blocks, stream);
    case DType::Int16: return combine_integer<int16_t>(k, out, ins, n, count, max_blocks, stream);
    case DType::Int32: return combine_integer<int32_t>(k, out, ins, n, count, max_blocks, stream);
    case DType::Int64: return combine_integer<int64_t>(k, out, ins, n, count, max_blocks, stream);
    case DType::Float16: return combine_floating<HalfBits, Through>(k, out, ins, n, count, max_blocks, stream);
    case DType::BFloat16: return combine_floating<BFloat16Bits, Through>(k, out, ins, n, count, max_blocks, stream);
    case DType::Float32: return combine_floating<float, Direct>(k, out, ins, n, count, max_blocks, stream);
    case DType::Float64: return combine_floating<double, Direct>(k, out, ins, n, count, max_blocks, stream);
    case DType::Complex64: return combine_complex<float>(k, out, ins, n, count, max_blocks, stream);
    case DType::Complex128: return combine_complex<double>(k, out, ins, n, count, max_blocks, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_finalize(ReduceOp op, DType dtype, void* data, size_t count, int contributors, int max_blocks,
                            cudaStream_t stream) {
  if (op.kind() != ReduceOp::AVG && op.kind() != ReduceOp::PREMUL_SUM) return cudaSuccess;
  if (op.kind() == ReduceOp::AVG && contributors <= 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  switch (dtype) {
    case DType::Bool: return cudaErrorInvalidValue;
    case DType::UInt8: return finalize_typed<uint8_t>(op, data, count, contributors, max_blocks, stream);
    case DType::Int8: return finalize_typed<int8_t>(op, data, count, contributors, max_blocks, stream);
    case DType::Int16: return finalize_typed<int16_t>(op, data, count, contributors, max_blocks, stream);
    case DType::Int32: return finalize_typed<int32_t>(op, data, count, contributors, max_blocks, stream);
    case DType::Int64: return finalize_typed<int64_t>(op, data, count, contributors, max_blocks, stream);
    case DType::Float16: return finalize_typed<HalfBits>(op, data, count, contributors, max_blocks, stream);
    case DType::BFloat16: return finalize_typed<BFloat16Bits>(op, data, count, contributors, max_blocks, stream);
    case DType::Float32: return finalize_typed<float>(op, data, count, contributors, max_blocks, stream);
    case DType::Float64: return finalize_typed<double>(op, data, count, contributors, max_blocks, stream);
    case DType::Complex64: return finalize_typed<Complex<float>>(op, data, count, contributors, max_blocks, stream);
    case DType::Complex128: return finalize_typed<Complex<double>>(op, data, count, contributors, max_blocks, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tdist::device::kernels
