// Element types and devices of tensors exchanged by tdist.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace tdist {

enum class DType : uint8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128,
};
inline constexpr int kNumDTypes = 12;

// Bit containers for the 16-bit floating types; arithmetic goes through float.
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

// Conversions of the 16-bit types: to float is exact; from float rounds to nearest even,
// overflows to +-Inf, keeps Inf, and turns any NaN into a quiet NaN of the same sign.
float to_float(Half h);
float to_float(BFloat16 b);
Half to_half(float f);
BFloat16 to_bfloat16(float f);

// DistValueError naming a code that is no DType (dtype_size's error).
[[noreturn]] void throw_invalid_dtype(DType t);
// Bytes per element. Inline: every call asks it of its tensors.
constexpr size_t dtype_size(DType t) {
  constexpr uint8_t kSizes[kNumDTypes] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};  // by DType, in its order
  const auto i = static_cast<unsigned>(t);
  if (i >= static_cast<unsigned>(kNumDTypes)) throw_invalid_dtype(t);
  return kSizes[i];
}
std::string_view dtype_name(DType t);  // "float32", "bfloat16", ...
bool is_floating(DType t);             // float16, bfloat16, float32, float64
bool is_complex(DType t);
bool is_integral(DType t);             // bool and the integer types
bool is_valid(DType t);                // one of the enumerators above (e.g. after a cast from the wire)

// Maps a C++ element type to its DType (used by the std::vector/std::span views).
template <typename T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<std::complex<float>> { static constexpr DType value = DType::Complex64; };
template <> struct dtype_of<std::complex<double>> { static constexpr DType value = DType::Complex128; };
template <typename T> inline constexpr DType dtype_of_v = dtype_of<std::remove_cv_t<T>>::value;

enum class DeviceType : uint8_t { CPU, CUDA };

// The one table of device type names ("cpu", "cuda"), as torch spells them,
// and the backend each device gets by default (DeviceMesh, backend specs).
const char* device_type_name(DeviceType type);
std::optional<DeviceType> parse_device_type(std::string_view name);  // nullopt: not a device type
const char* default_backend_of(DeviceType type);
// "'cpu', 'cuda'": for error messages.
std::string device_type_names();

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = -1;  // -1: the current device of that type
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};

}  // namespace tdist
