// Ranks of one group as threads of the test process, over a HashStore, and
// typed fill/compare helpers for every dtype.
#pragma once

#include <gtest/gtest.h>

#include <complex>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/harness.h"
#include "tdist/tdist.h"
#include "tensor/half.h"

namespace tdist::testing {

using detail::bfloat16_bits_to_float;
using detail::float_to_bfloat16_bits;
using detail::float_to_half_bits;
using detail::half_bits_to_float;

// Runs fn(group) on n threads, each with its own ProcessGroup of a fresh world.
inline void with_thread_world(int n, const std::function<void(ProcessGroup&)>& fn,
                              std::chrono::milliseconds timeout = std::chrono::seconds(60),
                              const std::string& backend = "tdist") {
  auto store = std::make_shared<HashStore>();
  run_in_threads(n, [&](int rank) {
    ProcessGroupOptions o;
    o.backend = backend;
    o.timeout = timeout;
    ProcessGroup pg(store, rank, n, o);
    fn(pg);
  });
}

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::Bool,    DType::UInt8,    DType::Int8,    DType::Int16,
                                       DType::Int32,   DType::Int64,    DType::Float16, DType::BFloat16,
                                       DType::Float32, DType::Float64,  DType::Complex64, DType::Complex128};
  return v;
}

inline const std::vector<ReduceOp>& all_ops() {
  static const std::vector<ReduceOp> v = {ReduceOp::SUM, ReduceOp::AVG,  ReduceOp::PRODUCT,
                                          ReduceOp::MIN, ReduceOp::MAX,  ReduceOp::BAND,
                                          ReduceOp::BOR, ReduceOp::BXOR, ReduceOp::premul_sum(0.5)};
  return v;
}

// A buffer of `count` elements of `dtype`, element i set to value(i) (small
// integers, exactly representable in every dtype).
class Buffer {
 public:
  Buffer(DType dtype, size_t count) : dtype_(dtype), count_(count), bytes_(count * dtype_size(dtype) + 1) {}
  template <typename F>
  Buffer(DType dtype, size_t count, F value) : Buffer(dtype, count) {
    for (size_t i = 0; i < count; ++i) set(i, value(i));
  }
  Tensor tensor() { return Tensor(bytes_.data(), dtype_, {static_cast<int64_t>(count_)}); }
  void* data() { return bytes_.data(); }
  size_t count() const { return count_; }
  size_t nbytes() const { return count_ * dtype_size(dtype_); }
  bool same_bytes(const Buffer& o) const { return nbytes() == o.nbytes() && std::memcmp(bytes_.data(), o.bytes_.data(), nbytes()) == 0; }

  void set(size_t i, long v) {
    char* p = bytes_.data() + i * dtype_size(dtype_);
    switch (dtype_) {
      case DType::Bool: *reinterpret_cast<uint8_t*>(p) = v != 0; break;
      case DType::UInt8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
      case DType::Int8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
      case DType::Int16: *reinterpret_cast<int16_t*>(p) = static_cast<int16_t>(v); break;
      case DType::Int32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
      case DType::Int64: *reinterpret_cast<int64_t*>(p) = v; break;
      case DType::Float16: *reinterpret_cast<uint16_t*>(p) = float_to_half_bits(static_cast<float>(v)); break;
      case DType::BFloat16: *reinterpret_cast<uint16_t*>(p) = float_to_bfloat16_bits(static_cast<float>(v)); break;
      case DType::Float32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
      case DType::Float64: *reinterpret_cast<double*>(p) = static_cast<double>(v); break;
      case DType::Complex64: *reinterpret_cast<std::complex<float>*>(p) = {static_cast<float>(v), static_cast<float>(-v)}; break;
      case DType::Complex128: *reinterpret_cast<std::complex<double>*>(p) = {static_cast<double>(v), static_cast<double>(-v)}; break;
    }
  }
  // Element i as text, for failure messages.
  std::string at(size_t i) const {
    const char* p = bytes_.data() + i * dtype_size(dtype_);
    switch (dtype_) {
      case DType::Bool: case DType::UInt8: return std::to_string(*reinterpret_cast<const uint8_t*>(p));
      case DType::Int8: return std::to_string(*reinterpret_cast<const int8_t*>(p));
      case DType::Int16: return std::to_string(*reinterpret_cast<const int16_t*>(p));
      case DType::Int32: return std::to_string(*reinterpret_cast<const int32_t*>(p));
      case DType::Int64: return std::to_string(*reinterpret_cast<const int64_t*>(p));
      case DType::Float16: return std::to_string(half_bits_to_float(*reinterpret_cast<const uint16_t*>(p)));
      case DType::BFloat16: return std::to_string(bfloat16_bits_to_float(*reinterpret_cast<const uint16_t*>(p)));
      case DType::Float32: return std::to_string(*reinterpret_cast<const float*>(p));
      case DType::Float64: return std::to_string(*reinterpret_cast<const double*>(p));
      case DType::Complex64: return std::to_string(reinterpret_cast<const std::complex<float>*>(p)->real());
      case DType::Complex128: return std::to_string(reinterpret_cast<const std::complex<double>*>(p)->real());
    }
    return "?";
  }
  // Element i as a complex double (exact for every dtype used with small values).
  std::complex<double> value(size_t i) const {
    const char* p = bytes_.data() + i * dtype_size(dtype_);
    switch (dtype_) {
      case DType::Bool: case DType::UInt8: return *reinterpret_cast<const uint8_t*>(p);
      case DType::Int8: return *reinterpret_cast<const int8_t*>(p);
      case DType::Int16: return *reinterpret_cast<const int16_t*>(p);
      case DType::Int32: return *reinterpret_cast<const int32_t*>(p);
      case DType::Int64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
      case DType::Float16: return half_bits_to_float(*reinterpret_cast<const uint16_t*>(p));
      case DType::BFloat16: return bfloat16_bits_to_float(*reinterpret_cast<const uint16_t*>(p));
      case DType::Float32: return *reinterpret_cast<const float*>(p);
      case DType::Float64: return *reinterpret_cast<const double*>(p);
      case DType::Complex64: return *reinterpret_cast<const std::complex<float>*>(p);
      case DType::Complex128: return *reinterpret_cast<const std::complex<double>*>(p);
    }
    return 0;
  }
  // Index of the first element whose value differs (so +0 equals -0, which
  // reduction order may flip), or -1.
  long first_difference(const Buffer& o) const {
    for (size_t i = 0; i < count_; ++i)
      if (value(i) != o.value(i)) return static_cast<long>(i);
    return -1;
  }

 private:
  DType dtype_;
  size_t count_;
  std::vector<char> bytes_;
};

}  // namespace tdist::testing
