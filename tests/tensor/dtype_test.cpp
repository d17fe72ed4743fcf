// DType facts, Device::str and the public 16-bit conversions.
#include <gtest/gtest.h>

#include <complex>
#include <limits>

#include "tdist/dtype.h"
#include "tdist/errors.h"

namespace tdist {
namespace {

struct Expected {
  DType dtype;
  size_t size;
  const char* name;
  bool floating, complex, integral;
};

constexpr Expected kAll[] = {
    {DType::Bool, 1, "bool", false, false, true},
    {DType::UInt8, 1, "uint8", false, false, true},
    {DType::Int8, 1, "int8", false, false, true},
    {DType::Int16, 2, "int16", false, false, true},
    {DType::Int32, 4, "int32", false, false, true},
    {DType::Int64, 8, "int64", false, false, true},
    {DType::Float16, 2, "float16", true, false, false},
    {DType::BFloat16, 2, "bfloat16", true, false, false},
    {DType::Float32, 4, "float32", true, false, false},
    {DType::Float64, 8, "float64", true, false, false},
    {DType::Complex64, 8, "complex64", false, true, false},
    {DType::Complex128, 16, "complex128", false, true, false},
};

TEST(DTypeTest, EveryDTypeHasSizeNameAndClass) {
  static_assert(std::size(kAll) == kNumDTypes);
  for (const auto& e : kAll) {
    SCOPED_TRACE(e.name);
    EXPECT_TRUE(is_valid(e.dtype));
    EXPECT_EQ(dtype_size(e.dtype), e.size);
    EXPECT_EQ(dtype_name(e.dtype), e.name);
    EXPECT_EQ(is_floating(e.dtype), e.floating);
    EXPECT_EQ(is_complex(e.dtype), e.complex);
    EXPECT_EQ(is_integral(e.dtype), e.integral);
    // Exactly one class each.
    EXPECT_EQ(int(e.floating) + int(e.complex) + int(e.integral), 1);
  }
}

TEST(DTypeTest, SizesMatchTheCppTypes) {
  EXPECT_EQ(dtype_size(dtype_of_v<bool>), sizeof(bool));
  EXPECT_EQ(dtype_size(dtype_of_v<uint8_t>), sizeof(uint8_t));
  EXPECT_EQ(dtype_size(dtype_of_v<int8_t>), sizeof(int8_t));
  EXPECT_EQ(dtype_size(dtype_of_v<int16_t>), sizeof(int16_t));
  EXPECT_EQ(dtype_size(dtype_of_v<int32_t>), sizeof(int32_t));
  EXPECT_EQ(dtype_size(dtype_of_v<int64_t>), sizeof(int64_t));
  EXPECT_EQ(dtype_size(dtype_of_v<Half>), sizeof(Half));
  EXPECT_EQ(dtype_size(dtype_of_v<BFloat16>), sizeof(BFloat16));
  EXPECT_EQ(dtype_size(dtype_of_v<float>), sizeof(float));
  EXPECT_EQ(dtype_size(dtype_of_v<double>), sizeof(double));
  EXPECT_EQ(dtype_size(dtype_of_v<std::complex<float>>), sizeof(std::complex<float>));
  EXPECT_EQ(dtype_size(dtype_of_v<std::complex<double>>), sizeof(std::complex<double>));
  EXPECT_EQ(dtype_of_v<const float>, DType::Float32);
}

TEST(DTypeTest, InvalidCodesAreRejected) {
  const auto bad = static_cast<DType>(kNumDTypes);
  EXPECT_FALSE(is_valid(bad));
  EXPECT_EQ(dtype_name(bad), "invalid");
  EXPECT_FALSE(is_floating(bad));
  EXPECT_FALSE(is_complex(bad));
  EXPECT_FALSE(is_integral(bad));
  EXPECT_THROW(dtype_size(bad), DistValueError);
  EXPECT_THROW(dtype_size(static_cast<DType>(255)), DistValueError);
}

TEST(DeviceTest, Str) {
  EXPECT_EQ(Device{}.str(), "cpu");
  EXPECT_EQ((Device{DeviceType::CPU, 0}).str(), "cpu:0");
  EXPECT_EQ((Device{DeviceType::CUDA, -1}).str(), "cuda");
  EXPECT_EQ((Device{DeviceType::CUDA, 3}).str(), "cuda:3");
  EXPECT_EQ(Device{}, (Device{DeviceType::CPU, -1}));
  EXPECT_NE((Device{DeviceType::CUDA, 0}), (Device{DeviceType::CUDA, 1}));
}

TEST(DTypeTest, PublicHalfConversions) {
  EXPECT_EQ(to_float(Half{0x3C00}), 1.0f);
  EXPECT_EQ(to_half(1.0f).bits, 0x3C00);
  EXPECT_EQ(to_half(-2.0f).bits, 0xC000);
  EXPECT_EQ(to_float(BFloat16{0x3F80}), 1.0f);
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(to_bfloat16(-2.0f).bits, 0xC000);
  EXPECT_TRUE(std::isnan(to_float(to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace tdist
