// DType facts (size, name, classification), Device::str and the 16-bit conversions.
#include "tdist/dtype.h"

#include "tdist/errors.h"
#include "tensor/half.h"

namespace tdist {

namespace {

struct DTypeInfo {
  std::string_view name;
  size_t size;
  bool floating;
  bool complex;
  bool integral;
};

// Indexed by DType; the order must follow the enum.
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"bool", 1, false, false, true},        {"uint8", 1, false, false, true},
    {"int8", 1, false, false, true},        {"int16", 2, false, false, true},
    {"int32", 4, false, false, true},       {"int64", 8, false, false, true},
    {"float16", 2, true, false, false},     {"bfloat16", 2, true, false, false},
    {"float32", 4, true, false, false},     {"float64", 8, true, false, false},
    {"complex64", 8, false, true, false},   {"complex128", 16, false, true, false},
};
static_assert(static_cast<int>(DType::Complex128) + 1 == kNumDTypes);

const DTypeInfo* info(DType t) {
  auto i = static_cast<unsigned>(t);
  return i < static_cast<unsigned>(kNumDTypes) ? &kInfo[i] : nullptr;
}

}  // namespace

bool is_valid(DType t) { return info(t) != nullptr; }

// dtype_size (tdist/dtype.h) keeps the sizes of this table in a table of its own.
constexpr bool sizes_agree() {
  for (int d = 0; d < kNumDTypes; ++d)
    if (dtype_size(static_cast<DType>(d)) != kInfo[d].size) return false;
  return true;
}
static_assert(sizes_agree());

void throw_invalid_dtype(DType t) {
  throw DistValueError("invalid dtype code " + std::to_string(static_cast<unsigned>(t)) + " (valid: 0.." +
                       std::to_string(kNumDTypes - 1) + ")");
}

std::string_view dtype_name(DType t) {
  if (const auto* i = info(t)) return i->name;
  return "invalid";
}

bool is_floating(DType t) {
  const auto* i = info(t);
  return i && i->floating;
}

bool is_complex(DType t) {
  const auto* i = info(t);
  return i && i->complex;
}

bool is_integral(DType t) {
  const auto* i = info(t);
  return i && i->integral;
}

namespace {
struct DeviceTypeInfo {
  DeviceType type;
  const char* name;
  const char* default_backend;
};
constexpr DeviceTypeInfo kDeviceTypes[] = {
    {DeviceType::CPU, "cpu", "tdist"},
    {DeviceType::CUDA, "cuda", "nccl"},
};
}  // namespace

const char* device_type_name(DeviceType type) {
  for (const auto& d : kDeviceTypes)
    if (d.type == type) return d.name;
  return "unknown";
}

std::optional<DeviceType> parse_device_type(std::string_view name) {
  for (const auto& d : kDeviceTypes)
    if (name == d.name) return d.type;
  return std::nullopt;
}

const char* default_backend_of(DeviceType type) {
  for (const auto& d : kDeviceTypes)
    if (d.type == type) return d.default_backend;
  return "tdist";
}

std::string device_type_names() {
  std::string out;
  for (const auto& d : kDeviceTypes) out += (out.empty() ? "'" : ", '") + std::string(d.name) + "'";
  return out;
}

std::string Device::str() const {
  std::string s = device_type_name(type);
  if (index >= 0) s += ":" + std::to_string(index);
  return s;
}

float to_float(Half h) { return detail::half_bits_to_float(h.bits); }
float to_float(BFloat16 b) { return detail::bfloat16_bits_to_float(b.bits); }
Half to_half(float f) { return Half{detail::float_to_half_bits(f)}; }
BFloat16 to_bfloat16(float f) { return BFloat16{detail::float_to_bfloat16_bits(f)}; }

}  // namespace tdist
