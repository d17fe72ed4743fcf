// DLPack import: every dtype code, byte_offset, strides, lanes, devices, and the deleter
// running exactly once when the last view goes.
#include <dlpack/dlpack.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tdist/errors.h"
#include "tdist/tensor.h"

namespace tdist {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A DLManagedTensor as a producer framework would hand it over: it owns the buffer,
// shape and strides, and its deleter counts how often it ran.
struct Producer {
  DLManagedTensor managed{};
  std::vector<unsigned char> buffer;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int* deleted;

  static void deleter(DLManagedTensor* self) {
    auto* p = static_cast<Producer*>(self->manager_ctx);
    ++*p->deleted;
    delete p;
  }
};

struct Spec {
  std::vector<int64_t> shape{4};
  std::vector<int64_t> strides;  // empty: null strides
  bool null_strides = true;
  uint8_t code = kDLFloat;
  uint8_t bits = 32;
  uint16_t lanes = 1;
  DLDeviceType device = kDLCPU;
  int device_id = 0;
  uint64_t byte_offset = 0;
};

DLManagedTensor* make(const Spec& s, int* deleted) {
  auto* p = new Producer;
  p->deleted = deleted;
  p->shape = s.shape;
  p->strides = s.strides;
  int64_t n = 1;
  for (auto d : s.shape) n *= d;
  p->buffer.resize(static_cast<size_t>(n) * ((s.bits + 7) / 8) * s.lanes + s.byte_offset + 1);
  DLTensor& t = p->managed.dl_tensor;
  t.data = p->buffer.data();
  t.device = DLDevice{s.device, s.device_id};
  t.ndim = static_cast<int>(s.shape.size());
  t.dtype = DLDataType{s.code, s.bits, s.lanes};
  t.shape = p->shape.data();
  t.strides = s.null_strides ? nullptr : p->strides.data();
  t.byte_offset = s.byte_offset;
  p->managed.manager_ctx = p;
  p->managed.deleter = &Producer::deleter;
  return &p->managed;
}

// On a failed import the caller keeps ownership; this releases it.
void release(DLManagedTensor* m) { m->deleter(m); }

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

TEST(DLPackImport, EveryDTypeCode) {
  struct Case {
    uint8_t code, bits;
    DType dtype;
  };
  const Case cases[] = {
      {kDLInt, 8, DType::Int8},          {kDLInt, 16, DType::Int16},       {kDLInt, 32, DType::Int32},
      {kDLInt, 64, DType::Int64},        {kDLUInt, 8, DType::UInt8},       {kDLUInt, 1, DType::Bool},
      {6, 8, DType::Bool},               {6, 1, DType::Bool},              {kDLFloat, 16, DType::Float16},
      {kDLFloat, 32, DType::Float32},    {kDLFloat, 64, DType::Float64},   {kDLBfloat, 16, DType::BFloat16},
      {kDLComplex, 64, DType::Complex64}, {kDLComplex, 128, DType::Complex128},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "code " << int(c.code) << " bits " << int(c.bits));
    int deleted = 0;
    {
      Spec s;
      s.code = c.code;
      s.bits = c.bits;
      s.shape = {2, 3};
      Tensor t = Tensor::from_dlpack(make(s, &deleted));
      EXPECT_EQ(t.dtype(), c.dtype);
      EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
      EXPECT_EQ(t.numel(), 6);
      EXPECT_EQ(t.nbytes(), 6 * dtype_size(c.dtype));
    }
    EXPECT_EQ(deleted, 1);
  }
}

TEST(DLPackImport, UnsupportedDTypesAreRejectedAndNotDeleted) {
  struct Case {
    uint8_t code, bits;
    const char* what;
  };
  const Case cases[] = {
      {kDLInt, 128, "int (code 0) with 128 bits"}, {kDLInt, 1, "int (code 0) with 1 bits"},
      {kDLUInt, 16, "uint (code 1) with 16 bits"}, {kDLUInt, 64, "uint (code 1) with 64 bits"},
      {kDLFloat, 8, "float (code 2) with 8 bits"}, {kDLFloat, 128, "float (code 2) with 128 bits"},
      {kDLOpaqueHandle, 64, "code 3 (bits 64)"}, {kDLBfloat, 32, "bfloat (code 4) with 32 bits"},
      {kDLComplex, 32, "complex (code 5) with 32 bits"}, {6, 16, "bool (code 6) with 16 bits"},
      {7, 8, "code 7 (bits 8)"}, {200, 32, "code 200 (bits 32)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    int deleted = 0;
    Spec s;
    s.code = c.code;
    s.bits = c.bits;
    DLManagedTensor* m = make(s, &deleted);
    std::string msg = value_error([&] { Tensor::from_dlpack(m); });
    EXPECT_THAT(msg, HasSubstr(c.what));
    EXPECT_EQ(deleted, 0);  // the caller still owns it
    release(m);
    EXPECT_EQ(deleted, 1);
  }
}

TEST(DLPackImport, ByteOffsetIsApplied) {
  int deleted = 0;
  Spec s;
  s.byte_offset = 16;
  DLManagedTensor* m = make(s, &deleted);
  auto* base = static_cast<char*>(m->dl_tensor.data);
  Tensor t = Tensor::from_dlpack(m);
  EXPECT_EQ(t.data(), base + 16);
  EXPECT_EQ(t.numel(), 4);
}

TEST(DLPackImport, ContiguousStridesAreAccepted) {
  struct Case {
    std::vector<int64_t> shape, strides;
  };
  const Case cases[] = {
      {{2, 3, 4}, {12, 4, 1}},
      {{5}, {1}},
      {{2, 1, 4}, {4, 99, 1}},   // size-1 dimensions may have any stride
      {{1, 6}, {0, 1}},
      {{1}, {7}},
      {{3, 0, 2}, {5, 9, 7}},    // no elements: strides do not matter
      {{}, {}},                   // scalar
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.strides));
    int deleted = 0;
    Spec s;
    s.shape = c.shape;
    s.strides = c.strides;
    s.null_strides = false;
    {
      Tensor t = Tensor::from_dlpack(make(s, &deleted));
      EXPECT_EQ(t.shape(), c.shape);
    }
    EXPECT_EQ(deleted, 1);
  }
}

TEST(DLPackImport, NonContiguousStridesAreRejected) {
  struct Case {
    std::vector<int64_t> shape, strides;
  };
  const Case cases[] = {
      {{2, 3}, {1, 2}},          // column-major (a transpose)
      {{4}, {2}},                // every other element
      {{2, 3, 4}, {24, 4, 1}},   // padded rows
      {{3}, {-1}},               // reversed
      {{2, 2}, {0, 1}},          // broadcast (expanded)
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.strides));
    int deleted = 0;
    Spec s;
    s.shape = c.shape;
    s.strides = c.strides;
    s.null_strides = false;
    DLManagedTensor* m = make(s, &deleted);
    std::string msg = value_error([&] { Tensor::from_dlpack(m); });
    EXPECT_THAT(msg, AllOf(HasSubstr("strides"), HasSubstr("not contiguous")));
    EXPECT_EQ(deleted, 0);
    release(m);
  }
}

TEST(DLPackImport, LanesAreRejected) {
  int deleted = 0;
  Spec s;
  s.lanes = 4;
  DLManagedTensor* m = make(s, &deleted);
  EXPECT_THAT(value_error([&] { Tensor::from_dlpack(m); }), HasSubstr("lanes 4"));
  release(m);
}

TEST(DLPackImport, Devices) {
  int deleted = 0;
  {
    Spec s;
    s.device = kDLCPU;
    EXPECT_EQ(Tensor::from_dlpack(make(s, &deleted)).device(), Device{});
    s.device = kDLCUDAHost;
    EXPECT_EQ(Tensor::from_dlpack(make(s, &deleted)).device(), Device{});
    s.device = kDLCUDA;
    s.device_id = 2;
    Tensor g = Tensor::from_dlpack(make(s, &deleted));
    EXPECT_EQ(g.device(), (Device{DeviceType::CUDA, 2}));
    EXPECT_FALSE(g.is_cpu());
    EXPECT_EQ(g.str(), "float32[4] on cuda:2");
  }
  EXPECT_EQ(deleted, 3);
  for (DLDeviceType d : {kDLROCM, kDLOpenCL, kDLVulkan, kDLCUDAManaged}) {
    Spec s;
    s.device = d;
    DLManagedTensor* m = make(s, &deleted);
    EXPECT_THAT(value_error([&] { Tensor::from_dlpack(m); }), HasSubstr("unsupported DLPack device kDL"));
    release(m);
  }
  Spec s;
  s.device = kDLCUDA;
  s.device_id = -1;
  DLManagedTensor* m = make(s, &deleted);
  EXPECT_THAT(value_error([&] { Tensor::from_dlpack(m); }), HasSubstr("device_id -1"));
  release(m);
}

TEST(DLPackImport, DeleterRunsOnceWhenTheLastCopyGoes) {
  int deleted = 0;
  Spec s;
  s.shape = {4, 6};
  Tensor t = Tensor::from_dlpack(make(s, &deleted));
  std::vector<Tensor> copies;
  copies.push_back(t);
  copies.push_back(t.slice(3, 5));
  copies.push_back(t.view({6, 4}));
  Tensor moved = std::move(copies[0]);
  t = Tensor();  // drop the original
  EXPECT_EQ(deleted, 0);
  copies.clear();
  EXPECT_EQ(deleted, 0);
  Tensor last = moved.slice(0, 1);
  moved = Tensor();
  EXPECT_EQ(deleted, 0);
  last = Tensor();
  EXPECT_EQ(deleted, 1);
}

TEST(DLPackImport, NullDeleterIsAllowed) {
  std::vector<float> buf(3);
  int64_t shape[1] = {3};
  DLManagedTensor m{};
  m.dl_tensor.data = buf.data();
  m.dl_tensor.device = {kDLCPU, 0};
  m.dl_tensor.ndim = 1;
  m.dl_tensor.dtype = {kDLFloat, 32, 1};
  m.dl_tensor.shape = shape;
  {
    Tensor t = Tensor::from_dlpack(&m);
    EXPECT_EQ(t.data(), buf.data());
  }
  SUCCEED();
}

TEST(DLPackImport, MalformedTensorsAreRejected) {
  EXPECT_THAT(value_error([] { Tensor::from_dlpack(nullptr); }), HasSubstr("null"));
  int deleted = 0;
  Spec s;
  DLManagedTensor* m = make(s, &deleted);
  m->dl_tensor.ndim = -1;
  EXPECT_THAT(value_error([&] { Tensor::from_dlpack(m); }), HasSubstr("ndim -1"));
  m->dl_tensor.ndim = 1;
  m->dl_tensor.shape[0] = -3;
  EXPECT_THAT(value_error([&] { Tensor::from_dlpack(m); }), HasSubstr("negative"));
  m->dl_tensor.shape[0] = 4;
  void* data = m->dl_tensor.data;
  m->dl_tensor.data = nullptr;
  EXPECT_THAT(value_error([&] { Tensor::from_dlpack(m); }), HasSubstr("data is null"));
  m->dl_tensor.data = data;
  EXPECT_EQ(deleted, 0);
  release(m);
}

}  // namespace
}  // namespace tdist
