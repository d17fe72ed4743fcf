// Tensor views: construction from vectors, spans and pointers; shape facts; slice; view; str.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <complex>
#include <limits>
#include <span>
#include <vector>

#include "tdist/errors.h"
#include "tdist/tensor.h"

namespace tdist {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Runs f, expects DistValueError, returns its message.
template <typename F>
std::string value_error(F&& f) {
  try {
    f();
  } catch (const DistValueError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DistValueError";
  return "";
}

TEST(TensorView, FromVector) {
  std::vector<float> v(10, 1.5f);
  Tensor t = v;
  EXPECT_EQ(t.data(), v.data());
  EXPECT_EQ(t.data_as<float>(), v.data());
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.shape(), std::vector<int64_t>{10});
  EXPECT_EQ(t.numel(), 10);
  EXPECT_EQ(t.element_size(), 4u);
  EXPECT_EQ(t.nbytes(), 40u);
  EXPECT_TRUE(t.is_cpu());
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.device(), Device{});
  EXPECT_EQ(t.str(), "float32[10] on cpu");
}

TEST(TensorView, FromVectorsOfEveryElementType) {
  std::vector<uint8_t> u8(3);
  std::vector<int8_t> i8(3);
  std::vector<int16_t> i16(3);
  std::vector<int32_t> i32(3);
  std::vector<int64_t> i64(3);
  std::vector<Half> f16(3);
  std::vector<BFloat16> bf16(3);
  std::vector<double> f64(3);
  std::vector<std::complex<float>> c64(3);
  std::vector<std::complex<double>> c128(3);
  EXPECT_EQ(Tensor(u8).dtype(), DType::UInt8);
  EXPECT_EQ(Tensor(i8).dtype(), DType::Int8);
  EXPECT_EQ(Tensor(i16).dtype(), DType::Int16);
  EXPECT_EQ(Tensor(i32).dtype(), DType::Int32);
  EXPECT_EQ(Tensor(i64).dtype(), DType::Int64);
  EXPECT_EQ(Tensor(f16).dtype(), DType::Float16);
  EXPECT_EQ(Tensor(bf16).dtype(), DType::BFloat16);
  EXPECT_EQ(Tensor(f64).dtype(), DType::Float64);
  EXPECT_EQ(Tensor(c64).dtype(), DType::Complex64);
  EXPECT_EQ(Tensor(c128).dtype(), DType::Complex128);
  EXPECT_EQ(Tensor(c128).nbytes(), 48u);
  bool flags[4] = {true, false, true, true};
  Tensor b(flags, 4);
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.nbytes(), 4u);
}

TEST(TensorView, FromSpan) {
  std::vector<int32_t> v{1, 2, 3, 4, 5};
  std::span<int32_t> s(v);
  Tensor t = s.subspan(1, 3);
  EXPECT_EQ(t.data(), v.data() + 1);
  EXPECT_EQ(t.numel(), 3);
  EXPECT_EQ(t.dtype(), DType::Int32);
  const std::vector<int32_t>& cv = v;
  Tensor c = std::span<const int32_t>(cv);  // const memory: a view for sending
  EXPECT_EQ(c.data(), v.data());
  EXPECT_EQ(c.numel(), 5);
}

TEST(TensorView, EmptyVector) {
  std::vector<double> v;
  Tensor t = v;
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_TRUE(t.defined());
}

TEST(TensorView, FromPointerWithShape) {
  std::vector<double> buf(24);
  Tensor t(buf.data(), DType::Float64, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 24u * 8u);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(t.str(), "float64[2, 3, 4] on cpu");

  Tensor scalar(buf.data(), DType::Float64, {});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.str(), "float64[] on cpu");

  Tensor empty(buf.data(), DType::Float64, {3, 0, 5});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.nbytes(), 0u);

  Tensor gpu(reinterpret_cast<void*>(0x1000), DType::BFloat16, {4, 3}, Device{DeviceType::CUDA, 1});
  EXPECT_FALSE(gpu.is_cpu());
  EXPECT_EQ(gpu.str(), "bfloat16[4, 3] on cuda:1");
}

TEST(TensorView, TypedPointer) {
  int64_t x[6] = {};
  Tensor t(x, 6, Device{DeviceType::CPU, -1});
  EXPECT_EQ(t.dtype(), DType::Int64);
  EXPECT_EQ(t.numel(), 6);
  const float y[2] = {1, 2};
  Tensor c(y, 2);
  EXPECT_EQ(c.dtype(), DType::Float32);
  EXPECT_EQ(c.data(), static_cast<const void*>(y));
}

TEST(TensorView, DefaultIsEmpty) {
  Tensor t;
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_EQ(t.data(), nullptr);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.str(), "float32[0] on cpu");
}

TEST(TensorView, NegativeDimensionIsRejected) {
  float x[4];
  std::string msg = value_error([&] { Tensor(x, DType::Float32, {2, -2}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("dimension 1"), HasSubstr("[2, -2]"), HasSubstr("negative")));
}

TEST(TensorView, OverflowingShapeIsRejected) {
  const int64_t big = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_THROW(Tensor(nullptr, DType::Float32, {big, 4}), DistValueError);
  EXPECT_THROW(Tensor(nullptr, DType::Float64, {big / 2}), DistValueError);  // bytes overflow
}

TEST(TensorView, BadDeviceAndDTypeAreRejected) {
  float x[1];
  EXPECT_THROW(Tensor(x, DType::Float32, {1}, Device{DeviceType::CUDA, -2}), DistValueError);
  EXPECT_THROW(Tensor(x, static_cast<DType>(99), {1}), DistValueError);
}

TEST(TensorView, Slice) {
  std::vector<int16_t> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int16_t>(i);
  Tensor t(v.data(), DType::Int16, {3, 4});
  Tensor s = t.slice(5, 4);
  EXPECT_EQ(s.data(), v.data() + 5);
  EXPECT_EQ(s.shape(), std::vector<int64_t>{4});
  EXPECT_EQ(s.numel(), 4);
  EXPECT_EQ(s.dtype(), DType::Int16);
  EXPECT_EQ(s.data_as<int16_t>()[0], 5);
  EXPECT_EQ(t.slice(0, 12).numel(), 12);
  EXPECT_EQ(t.slice(12, 0).numel(), 0);  // empty at the end is fine
  EXPECT_EQ(t.slice(0, 0).numel(), 0);
  EXPECT_EQ(s.slice(1, 3).data(), v.data() + 6);  // slices of slices
}

TEST(TensorView, SliceBounds) {
  std::vector<float> v(12);
  Tensor t(v.data(), DType::Float32, {3, 4});
  std::string msg = value_error([&] { t.slice(10, 3); });
  EXPECT_THAT(msg, AllOf(HasSubstr("offset=10"), HasSubstr("count=3"), HasSubstr("12 elements"),
                         HasSubstr("float32[3, 4]")));
  EXPECT_THROW(t.slice(13, 0), DistValueError);
  EXPECT_THROW(t.slice(-1, 2), DistValueError);
  EXPECT_THROW(t.slice(0, -1), DistValueError);
  EXPECT_THROW(t.slice(1, std::numeric_limits<int64_t>::max()), DistValueError);  // no overflow
  EXPECT_THROW(Tensor().slice(0, 1), DistValueError);
}

TEST(TensorView, View) {
  std::vector<float> v(24);
  Tensor t = v;
  Tensor m = t.view({4, 6});
  EXPECT_EQ(m.data(), v.data());
  EXPECT_EQ(m.shape(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(m.numel(), 24);
  EXPECT_EQ(t.view({2, -1, 3}).shape(), (std::vector<int64_t>{2, 4, 3}));
  EXPECT_EQ(t.view({-1}).shape(), std::vector<int64_t>{24});
  EXPECT_EQ(m.view({24}).shape(), std::vector<int64_t>{24});
  std::string msg = value_error([&] { t.view({5, 5}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("[5, 5]"), HasSubstr("25"), HasSubstr("24")));
  EXPECT_THROW(t.view({-1, -1}), DistValueError);
  EXPECT_THROW(t.view({5, -1}), DistValueError);
  EXPECT_THROW(t.view({-2, -12}), DistValueError);
  // Scalars and empties.
  float one = 1;
  Tensor s(&one, DType::Float32, {});
  EXPECT_EQ(s.view({1, 1}).numel(), 1);
  EXPECT_EQ(s.view({}).numel(), 1);
  Tensor e(v.data(), DType::Float32, {0});
  EXPECT_EQ(e.view({0, 7}).numel(), 0);
  EXPECT_THROW(e.view({0, -1}), DistValueError);  // ambiguous
}

}  // namespace
}  // namespace tdist
