// The CUDA runtime behind src/device's seam (src/cuda/cuda_runtime.cpp), through the seam only.
//
// Without a GPU (CI): device_count() is 0 with the reason, require_runtime refuses naming "no
// CUDA device", and calls that need a device fail as DistBackendError naming the CUDA call.
// With a GPU (scripts/gpu_check.sh, `ctest -L gpu`): copies in every direction, event ordering
// across streams, the reduction kernels against the CPU kernels (src/reduce) bit for bit for
// every supported (op x dtype) at sizes 0, 1, 7, 4099 and 1 << 20, aligned and not, IPC into a
// child process, and streams waiting on a host word. Those skip here, saying why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/scoped_env.h"
#include "device/device_runtime.h"
#include "reduce/reduction_kernels.h"
#include "tdist/errors.h"

namespace tdist {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using device::Runtime;

// The child half of CudaIpc.ForkedChildWrites reads its handle from here.
constexpr const char* kIpcChildEnv = "TDIST_TEST_CUDA_IPC_HANDLE";

std::unique_ptr<Runtime> cuda_runtime() {
  auto rt = device::make_cuda_runtime();
  if (rt == nullptr) throw std::runtime_error("make_cuda_runtime returned null in a build with CUDA");
  return rt;
}

#define SKIP_WITHOUT_GPU(rt)                                                   \
  do {                                                                         \
    if ((rt).device_count() == 0) {                                            \
      GTEST_SKIP() << "no CUDA device: " << (rt).unavailable_reason();         \
    }                                                                          \
  } while (0)

// ---- without a GPU ------------------------------------------------------------------------

TEST(CudaRuntimeNoDevice, CountIsZeroWithAReason) {
  auto rt = cuda_runtime();
  EXPECT_TRUE(device::built_with_cuda());
  EXPECT_FALSE(rt->describe().empty());
  if (rt->device_count() > 0) {
    EXPECT_EQ(rt->unavailable_reason(), "");
    GTEST_SKIP() << "a CUDA device is present (" << rt->describe() << "): nothing to check without one";
  }
  EXPECT_THAT(rt->unavailable_reason(), StartsWith("cudaGetDeviceCount: "));
  EXPECT_THAT(rt->describe(), HasSubstr("no device"));
  EXPECT_FALSE(rt->can_wait_on_host_word(0));
  int on_stack = 0;
  EXPECT_EQ(rt->device_of(&on_stack), -1);
}

TEST(CudaRuntimeNoDevice, RequireRuntimeSaysNoCudaDevice) {
  testing::ScopedEnv no_emulation("TDIST_EMULATE_CUDA", nullptr);
  Runtime* rt = device::runtime(DeviceType::CUDA);
  ASSERT_NE(rt, nullptr);
  if (rt->device_count() > 0) GTEST_SKIP() << "a CUDA device is present (" << rt->describe() << ")";
  try {
    device::require_runtime(DeviceType::CUDA, "all_reduce of float32[8] on cuda:0");
    FAIL() << "require_runtime did not throw";
  } catch (const DistBackendError& e) {
    EXPECT_THAT(e.what(), HasSubstr("all_reduce of float32[8] on cuda:0: no CUDA device: cudaGetDeviceCount: "));
  }
}

TEST(CudaRuntimeNoDevice, CallsNeedingADeviceSayThereIsNone) {
  auto rt = cuda_runtime();
  if (rt->device_count() > 0) GTEST_SKIP() << "a CUDA device is present (" << rt->describe() << ")";
  try {
    rt->alloc_device(0, 4096);
    FAIL() << "alloc_device did not throw";
  } catch (const DistBackendError& e) {
    EXPECT_THAT(e.what(), StartsWith("alloc_device on cuda:0: no CUDA device: cudaGetDeviceCount: "));
  }
  EXPECT_THROW(rt->create_stream(0), DistBackendError);
  EXPECT_THROW(rt->create_event(0), DistBackendError);
  EXPECT_THROW(rt->alloc_pinned(64), DistBackendError);
  EXPECT_THROW(rt->ipc_open(0, std::string(128, '0')), DistBackendError);
}

// ---- copies, streams, events ----------------------------------------------------------------

std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(CudaRuntime, CopiesInEveryDirection) {
  auto rt = cuda_runtime();
  SKIP_WITHOUT_GPU(*rt);
  constexpr size_t kBytes = (1 << 20) + 13;
  const auto want = pattern(kBytes, 1);
  void* d1 = rt->alloc_device(0, kBytes);
  void* d2 = rt->alloc_device(0, kBytes);
  auto* pinned = static_cast<uint8_t*>(rt->alloc_pinned(kBytes));
  auto* pinned2 = static_cast<uint8_t*>(rt->alloc_pinned(kBytes));
  EXPECT_EQ(rt->device_of(d1), 0);
  EXPECT_EQ(rt->device_of(static_cast<char*>(d1) + 100), 0);
  EXPECT_EQ(rt->device_of(pinned), -1);
  EXPECT_EQ(rt->device_of(want.data()), -1);
  for (bool own_stream : {false, true}) {
    SCOPED_TRACE(own_stream ? "own stream" : "default stream");
    device::StreamHandle s = own_stream ? rt->create_stream(0) : nullptr;
    std::vector<uint8_t> back(kBytes, 0);
    rt->copy(d1, want.data(), kBytes, s);            // pageable host -> device
    rt->copy(d2, d1, kBytes, s);                     // device -> device
    rt->copy(pinned, d2, kBytes, s);                 // device -> pinned host
    rt->copy(pinned2, pinned, kBytes, s);            // host -> host
    rt->copy(d1, pinned2, kBytes, s);                // pinned host -> device
    rt->copy(back.data(), d1, kBytes, s);            // device -> pageable host
    rt->copy(back.data(), d1, 0, s);                 // nothing
    rt->synchronize_stream(s);
    EXPECT_EQ(std::memcmp(back.data(), want.data(), kBytes), 0);
    EXPECT_EQ(std::memcmp(pinned, want.data(), kBytes), 0);
    if (s != nullptr) rt->destroy_stream(s);
    rt->copy(d1, std::vector<uint8_t>(kBytes, 0).data(), kBytes, nullptr);
    rt->synchronize_stream(nullptr);
  }
  rt->free_pinned(pinned2);
  rt->free_pinned(pinned);
  rt->free_device(0, d2);
  rt->free_device(0, d1);
}

TEST(CudaRuntime, EventsOrderStreams) {
  auto rt = cuda_runtime();
  SKIP_WITHOUT_GPU(*rt);
  constexpr size_t kBytes = 64 << 20;
  const auto want = pattern(kBytes, 2);
  auto* pinned = static_cast<uint8_t*>(rt->alloc_pinned(kBytes));
  std::memcpy(pinned, want.data(), kBytes);
  void* d1 = rt->alloc_device(0, kBytes);
  void* d2 = rt->alloc_device(0, kBytes);
  device::StreamHandle a = rt->create_stream(0);
  device::StreamHandle b = rt->create_stream(0);
  device::EventHandle ev = rt->create_event(0);
  for (int round = 0; round < 3; ++round) {
    rt->copy(d1, pinned, kBytes, a);
    rt->record(ev, a);
    rt->stream_wait(b, ev);  // b's copy reads d1 only after a wrote it
    rt->copy(d2, d1, kBytes, b);
    std::vector<uint8_t> back(kBytes, 0);
    rt->copy(back.data(), d2, kBytes, b);
    rt->synchronize_stream(b);
    EXPECT_TRUE(rt->query(ev));
    rt->synchronize(ev);
    ASSERT_EQ(std::memcmp(back.data(), want.data(), kBytes), 0) << "round " << round;
    rt->copy(d1, std::vector<uint8_t>(kBytes, 0).data(), kBytes, a);
    rt->synchronize_stream(a);
  }
  rt->destroy_event(ev);
  rt->destroy_stream(b);
  rt->destroy_stream(a);
  rt->free_device(0, d2);
  rt->free_device(0, d1);
  rt->free_pinned(pinned);
}

TEST(CudaRuntime, ErrorsNameTheCallTheDeviceAndTheSize) {
  auto rt = cuda_runtime();
  SKIP_WITHOUT_GPU(*rt);
  try {
    rt->alloc_device(0, size_t{1} << 60);
    FAIL() << "a 1 EiB cudaMalloc succeeded";
  } catch (const DistBackendError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cudaMalloc on cuda:0 (1152921504606846976 bytes) failed: "));
  }
  try {
    rt->set_device(rt->device_count());
    FAIL() << "set_device past the last device succeeded";
  } catch (const DistBackendError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cudaSetDevice on cuda:" + std::to_string(rt->device_count())));
  }
  // The runtime still works after those errors (they are not sticky).
  void* d = rt->alloc_device(0, 16);
  rt->free_device(0, d);
}

TEST(CudaRuntime, StreamWaitsOnHostWord) {
  auto rt = cuda_runtime();
  SKIP_WITHOUT_GPU(*rt);
  if (!rt->can_wait_on_host_word(0)) GTEST_SKIP() << "cuda:0 cannot wait on host memory (" << rt->describe() << ")";
  auto* word = static_cast<uint32_t*>(rt->alloc_pinned(sizeof(uint32_t)));
  __atomic_store_n(word, 0u, __ATOMIC_SEQ_CST);
  device::StreamHandle s = rt->create_stream(0);
  device::EventHandle ev = rt->create_event(0);
  rt->stream_wait_host_word(s, word, 1);
  rt->record(ev, s);
  // The stream cannot pass the wait before the word is written: not a timing assumption.
  EXPECT_FALSE(rt->query(ev));
  __atomic_store_n(word, 1u, __ATOMIC_SEQ_CST);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool done = false;
  while (!(done = rt->query(ev)) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(done) << "the stream did not pass its wait within 60 s of the word being written";
  // A value already reached does not block.
  rt->stream_wait_host_word(s, word, 1);
  rt->synchronize_stream(s);
  rt->destroy_event(ev);
  rt->destroy_stream(s);
  rt->free_pinned(word);
}

// ---- the reduction kernels against the CPU's ---------------------------------------------------

bool is_nan_bits(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::Float16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
    }
    case DType::BFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0;
    }
    case DType::Float32:
    case DType::Complex64: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case DType::Float64:
    case DType::Complex128: {
      double d;
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    }
    default: return false;
  }
}

// The first element that differs (NaN equals NaN, whatever its payload), or -1.
long first_difference(DType dtype, const uint8_t* got, const uint8_t* want, size_t count) {
  const size_t size = dtype_size(dtype);
  const size_t part = is_complex(dtype) ? size / 2 : size;  // compared per real component
  for (size_t i = 0; i < count; ++i) {
    for (size_t off = 0; off < size; off += part) {
      const uint8_t* g = got + i * size + off;
      const uint8_t* w = want + i * size + off;
      if (std::memcmp(g, w, part) == 0) continue;
      if (is_floating(dtype) || is_complex(dtype)) {
        if (is_nan_bits(dtype, g) && is_nan_bits(dtype, w)) continue;
      }
      return static_cast<long>(i);
    }
  }
  return -1;
}

std::string hex_of(const uint8_t* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = n; i-- > 0;) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

// Values with NaNs, signed zeros, wrap-around and non-boolean bytes mixed in.
std::vector<uint8_t> random_elements(DType dtype, size_t count, std::mt19937_64& rng) {
  const size_t size = dtype_size(dtype);
  std::vector<uint8_t> v(count * size);
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  auto value = [&]() -> double {
    const uint64_t r = rng() % 64;
    if (r == 0) return std::nan("");
    if (r == 1) return 0.0;
    if (r == 2) return -0.0;
    return real(rng);
  };
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = v.data() + i * size;
    switch (dtype) {
      case DType::Bool: p[0] = static_cast<uint8_t>(rng() % 4 == 0 ? 0 : rng() % 3); break;
      case DType::Float16: { uint16_t h = to_half(static_cast<float>(value())).bits; std::memcpy(p, &h, 2); break; }
      case DType::BFloat16: { uint16_t h = to_bfloat16(static_cast<float>(value())).bits; std::memcpy(p, &h, 2); break; }
      case DType::Float32: { float f = static_cast<float>(value()); std::memcpy(p, &f, 4); break; }
      case DType::Float64: { double d = value(); std::memcpy(p, &d, 8); break; }
      case DType::Complex64: { float f[2] = {static_cast<float>(value()), static_cast<float>(value())}; std::memcpy(p, f, 8); break; }
      case DType::Complex128: { double d[2] = {value(), value()}; std::memcpy(p, d, 16); break; }
      default: {  // integers: any bits (products and sums wrap)
        const uint64_t r = rng();
        std::memcpy(p, &r, size);
      }
    }
  }
  return v;
}

const ReduceOp kOps[] = {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
                         ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR, ReduceOp::premul_sum(0.3)};
const DType kDTypes[] = {DType::Bool, DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64,
                         DType::Float16, DType::BFloat16, DType::Float32, DType::Float64, DType::Complex64,
                         DType::Complex128};
constexpr size_t kCounts[] = {0, 1, 7, 4099, size_t{1} << 20};

// Element offsets of the output and of the inputs from a 256-byte boundary: aligned, all
// shifted alike (the kernels peel to a common 16-byte boundary), shifted differently (no vectors).
struct Offsets {
  size_t out;
  size_t in;
  const char* name;
};
constexpr Offsets kOffsets[] = {{0, 0, "aligned"}, {1, 1, "shifted alike"}, {3, 0, "shifted differently"}};

// Device buffers for one case, each at its element offset; copied back for checking.
class DeviceBuffers {
 public:
  DeviceBuffers(Runtime& rt, DType dtype, size_t count, size_t offset, int n) : rt_(rt), size_(dtype_size(dtype)) {
    bytes_ = (count + offset) * size_;
    for (int k = 0; k < n; ++k) {
      bases_.push_back(rt_.alloc_device(0, bytes_ == 0 ? 1 : bytes_));
      ptrs_.push_back(static_cast<char*>(bases_.back()) + offset * size_);
    }
  }
  ~DeviceBuffers() {
    for (void* b : bases_) rt_.free_device(0, b);
  }
  void* at(int k) const { return ptrs_[k]; }
  void upload(int k, const std::vector<uint8_t>& host) { rt_.copy(ptrs_[k], host.data(), host.size(), nullptr); }
  std::vector<uint8_t> download(int k, size_t bytes) {
    std::vector<uint8_t> host(bytes);
    rt_.copy(host.data(), ptrs_[k], bytes, nullptr);
    rt_.synchronize_stream(nullptr);
    return host;
  }

 private:
  Runtime& rt_;
  size_t size_;
  size_t bytes_ = 0;
  std::vector<void*> bases_;
  std::vector<void*> ptrs_;
};

std::string case_name(ReduceOp op, DType dtype, size_t count, const char* what, const Offsets& o) {
  return std::string(what) + " " + std::string(op.name()) + " " + std::string(dtype_name(dtype)) + " x" +
         std::to_string(count) + " (" + o.name + ")";
}

void expect_same(DType dtype, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t count,
                 const std::string& name) {
  const long i = first_difference(dtype, got.data(), want.data(), count);
  const size_t size = dtype_size(dtype);
  EXPECT_EQ(i, -1) << name << ": element " << i << " is 0x"
                   << (i >= 0 ? hex_of(got.data() + i * size, size) : "") << ", the CPU gives 0x"
                   << (i >= 0 ? hex_of(want.data() + i * size, size) : "");
}

// acc (op)= in on the device, then finalize over 2 contributors; against the CPU.
void check_accumulate(Runtime& rt, ReduceOp op, DType dtype, size_t count, const Offsets& o, std::mt19937_64& rng,
                      device::StreamHandle stream) {
  const size_t bytes = count * dtype_size(dtype);
  auto acc = random_elements(dtype, count, rng);
  const auto in = random_elements(dtype, count, rng);
  DeviceBuffers dacc(rt, dtype, count, o.out, 1), din(rt, dtype, count, o.in, 1);
  dacc.upload(0, acc);
  din.upload(0, in);
  rt.synchronize_stream(nullptr);
  rt.accumulate(op, dtype, dacc.at(0), din.at(0), count, stream);
  rt.finalize(op, dtype, dacc.at(0), count, 2, stream);
  rt.synchronize_stream(stream);
  reduction::accumulate(op, dtype, acc.data(), in.data(), count);
  reduction::finalize(op, dtype, acc.data(), count, 2);
  expect_same(dtype, dacc.download(0, bytes), acc, count, case_name(op, dtype, count, "accumulate", o));
}

// out = ins[0] (op) ... (op) ins[n-1] in one pass, then finalize over n; against n-1 CPU combines.
// `in_place`: out is ins[0].
void check_combine(Runtime& rt, ReduceOp op, DType dtype, size_t count, int n, bool in_place, const Offsets& o,
                   std::mt19937_64& rng, device::StreamHandle stream) {
  const size_t bytes = count * dtype_size(dtype);
  std::vector<std::vector<uint8_t>> host;
  DeviceBuffers ins(rt, dtype, count, o.in, n), out(rt, dtype, count, o.out, 1);
  std::vector<const void*> ptrs;
  for (int k = 0; k < n; ++k) {
    host.push_back(random_elements(dtype, count, rng));
    ins.upload(k, host.back());
    ptrs.push_back(ins.at(k));
  }
  rt.synchronize_stream(nullptr);
  void* dst = in_place ? ins.at(0) : out.at(0);
  rt.combine(op, dtype, dst, ptrs.data(), n, count, stream);
  rt.finalize(op, dtype, dst, count, n, stream);
  rt.synchronize_stream(stream);
  std::vector<uint8_t> want = host[0];
  for (int k = 1; k < n; ++k) reduction::combine(op, dtype, want.data(), want.data(), host[k].data(), count);
  reduction::finalize(op, dtype, want.data(), count, n);
  const auto got = in_place ? ins.download(0, bytes) : out.download(0, bytes);
  expect_same(dtype, got, want, count,
              case_name(op, dtype, count, in_place ? "combine in place" : "combine", o) + " of " + std::to_string(n));
}

class CudaKernels : public ::testing::TestWithParam<DType> {};

TEST_P(CudaKernels, MatchTheCpuKernels) {
  auto rt = cuda_runtime();
  SKIP_WITHOUT_GPU(*rt);
  const DType dtype = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(dtype) * 7919 + 1);
  device::StreamHandle stream = rt->create_stream(0);
  for (const ReduceOp& op : kOps) {
    if (!reduce_op_supported(op, dtype)) {
      EXPECT_THROW(rt->accumulate(op, dtype, nullptr, nullptr, 0, stream), DistValueError);
      continue;
    }
    for (size_t count : kCounts) {
      for (const Offsets& o : kOffsets) {
        // The odd shapes at every size up to 4099; at 1 << 20 the aligned and peeled paths.
        const bool large = count > 4099;
        if (large && o.out != o.in) continue;
        check_accumulate(*rt, op, dtype, count, o, rng, (&o - kOffsets) % 2 == 0 ? stream : nullptr);
        check_combine(*rt, op, dtype, count, 3, false, o, rng, stream);
        if (!large) {
          check_combine(*rt, op, dtype, count, 16, false, o, rng, stream);
          check_combine(*rt, op, dtype, count, 2, true, o, rng, nullptr);
          check_combine(*rt, op, dtype, count, 1, false, o, rng, stream);
        }
        if (HasFailure()) return;  // one report per dtype is enough to start from
      }
    }
  }
  rt->destroy_stream(stream);
}

INSTANTIATE_TEST_SUITE_P(EveryDType, CudaKernels, ::testing::ValuesIn(kDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(CudaKernelsArguments, AreCheckedAsOnTheCpu) {
  auto rt = cuda_runtime();
  SKIP_WITHOUT_GPU(*rt);
  void* d = rt->alloc_device(0, 64);
  const void* ins[17] = {};
  for (auto& p : ins) p = d;
  EXPECT_THROW(rt->combine(ReduceOp::SUM, DType::Float32, d, ins, 17, 4, nullptr), DistValueError);
  EXPECT_THROW(rt->combine(ReduceOp::SUM, DType::Float32, d, ins, 0, 4, nullptr), DistValueError);
  EXPECT_THROW(rt->finalize(ReduceOp::AVG, DType::Float32, d, 4, 0, nullptr), DistValueError);
  EXPECT_THROW(rt->accumulate(ReduceOp::BAND, DType::Float32, d, d, 4, nullptr), DistValueError);
  EXPECT_THROW(rt->accumulate(ReduceOp::SUM, DType::Float32, nullptr, d, 4, nullptr), DistValueError);
  rt->free_device(0, d);
}

// ---- IPC --------------------------------------------------------------------------------------

constexpr size_t kIpcBytes = 1 << 20;
constexpr size_t kIpcOffset = 4096;  // the exported pointer lies inside its allocation

// Runs only as the child that CudaIpc.ForkedChildWrites starts (a fresh process: CUDA state
// does not survive fork, so the child execs this binary again).
TEST(CudaIpc, Child) {
  const char* handle = std::getenv(kIpcChildEnv);
  if (handle == nullptr) GTEST_SKIP() << "runs only as the child process of CudaIpc.ForkedChildWrites";
  auto rt = cuda_runtime();
  ASSERT_GT(rt->device_count(), 0) << rt->unavailable_reason();
  void* mapped = rt->ipc_open(0, handle);
  EXPECT_EQ(rt->device_of(mapped), 0);
  const auto data = pattern(kIpcBytes, 3);
  rt->copy(mapped, data.data(), kIpcBytes, nullptr);
  rt->synchronize_stream(nullptr);
  rt->ipc_close(mapped);
}

TEST(CudaIpc, ForkedChildWrites) {
  auto rt = cuda_runtime();
  SKIP_WITHOUT_GPU(*rt);
  void* base = rt->alloc_device(0, kIpcOffset + kIpcBytes);
  void* buffer = static_cast<char*>(base) + kIpcOffset;
  rt->copy(base, std::vector<uint8_t>(kIpcOffset + kIpcBytes, 0).data(), kIpcOffset + kIpcBytes, nullptr);
  rt->synchronize_stream(nullptr);
  const std::string handle = rt->ipc_handle(buffer);
  EXPECT_THAT(handle, HasSubstr(":" + std::to_string(kIpcOffset)));

  // The same process opening its own handle gets its own memory back (ranks as threads).
  void* self = rt->ipc_open(0, handle);
  EXPECT_EQ(self, buffer);
  rt->ipc_close(self);
  EXPECT_THROW(rt->ipc_open(0, "not a handle"), DistBackendError);

  // Everything the child needs is made before fork: it only execs.
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) env_text.emplace_back(*e);
  env_text.push_back(std::string(kIpcChildEnv) + "=" + handle);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* argv[] = {"/proc/self/exe", "--gtest_filter=CudaIpc.Child", nullptr};
  const pid_t child = fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    execve("/proc/self/exe", const_cast<char* const*>(argv), envp.data());
    _exit(127);
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  pid_t done = 0;
  while ((done = waitpid(child, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the IPC child did not finish within 120 s";
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the IPC child failed (status " << status << ")";

  std::vector<uint8_t> back(kIpcOffset + kIpcBytes);
  rt->copy(back.data(), base, back.size(), nullptr);
  rt->synchronize_stream(nullptr);
  EXPECT_EQ(std::memcmp(back.data() + kIpcOffset, pattern(kIpcBytes, 3).data(), kIpcBytes), 0);
  EXPECT_EQ(std::count(back.begin(), back.begin() + kIpcOffset, 0), static_cast<long>(kIpcOffset))
      << "the child wrote before the exported pointer";
  rt->free_device(0, base);
}

}  // namespace
}  // namespace tdist
