// The nccl backend on a GPU, at world size 1 (NCCL refuses two ranks on one
// GPU, so one lent GPU allows no more): every operation over several dtypes
// and sizes {0, 1, odd, large} against the result computed here, AVG and
// PREMUL_SUM, groups made by new_group and split_group (ncclCommSplit), and
// the watchdog failing an operation at its timeout instead of hanging. Skips
// with the reason where there is no CUDA device. Labelled "gpu".
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "tdist/cuda.h"
#include "tdist/tdist.h"

namespace tdist {
namespace {

using namespace std::chrono_literals;

std::string no_gpu_reason() {
  if (std::getenv("TDIST_EMULATE_CUDA")) return "TDIST_EMULATE_CUDA is set: NCCL needs a real device";
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  cudaGetLastError();
  if (rc != cudaSuccess) return std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(rc);
  if (count == 0) return "no CUDA device: 0 devices";
  if (!is_nccl_available()) return "NCCL does not load here";
  return "";
}

#define REQUIRE_GPU()                                  \
  do {                                                 \
    const std::string why = no_gpu_reason();           \
    if (!why.empty()) GTEST_SKIP() << why;             \
  } while (0)

// A buffer on cuda:0 filled from / read back into host bytes.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    EXPECT_EQ(cudaMalloc(&ptr, n == 0 ? 1 : n), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  void upload(const std::vector<unsigned char>& host) { cudaMemcpy(ptr, host.data(), bytes, cudaMemcpyHostToDevice); }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes);
    cudaDeviceSynchronize();
    cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost);
    return host;
  }
  Tensor tensor(DType dtype, int64_t numel, size_t offset_bytes = 0) const {
    return Tensor(static_cast<char*>(ptr) + offset_bytes, dtype, {numel}, Device{DeviceType::CUDA, 0});
  }
};

// Small whole values in every dtype, so sums and products stay exact.
std::vector<unsigned char> pattern(DType dtype, int64_t numel, int seed) {
  std::vector<unsigned char> out(static_cast<size_t>(numel) * dtype_size(dtype));
  for (int64_t i = 0; i < numel; ++i) {
    const int v = static_cast<int>((i * 7 + seed) % 5) + 1;
    unsigned char* at = out.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::Bool: *at = static_cast<unsigned char>(v % 2); break;
      case DType::UInt8: *at = static_cast<unsigned char>(v); break;
      case DType::Int8: *reinterpret_cast<int8_t*>(at) = static_cast<int8_t>(v); break;
      case DType::Int32: *reinterpret_cast<int32_t*>(at) = v; break;
      case DType::Int64: *reinterpret_cast<int64_t*>(at) = v; break;
      case DType::Float16: *reinterpret_cast<Half*>(at) = to_half(static_cast<float>(v)); break;
      case DType::BFloat16: *reinterpret_cast<BFloat16*>(at) = to_bfloat16(static_cast<float>(v)); break;
      case DType::Float32: *reinterpret_cast<float*>(at) = static_cast<float>(v); break;
      case DType::Float64: *reinterpret_cast<double*>(at) = v; break;
      case DType::Complex64: {
        float c[2] = {static_cast<float>(v), static_cast<float>(-v)};
        std::memcpy(at, c, sizeof c);
        break;
      }
      default: break;
    }
  }
  return out;
}

// The same values times `factor` (PREMUL_SUM of one rank), for floating types.
std::vector<unsigned char> scaled(DType dtype, const std::vector<unsigned char>& in, double factor) {
  std::vector<unsigned char> out = in;
  const size_t n = in.size() / dtype_size(dtype);
  for (size_t i = 0; i < n; ++i) {
    unsigned char* at = out.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::Float32: *reinterpret_cast<float*>(at) *= static_cast<float>(factor); break;
      case DType::Float64: *reinterpret_cast<double*>(at) *= factor; break;
      case DType::Float16:
        *reinterpret_cast<Half*>(at) = to_half(to_float(*reinterpret_cast<Half*>(at)) * static_cast<float>(factor));
        break;
      default: break;
    }
  }
  return out;
}

const std::vector<DType> kDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                    DType::Int32,   DType::Int64,   DType::UInt8,   DType::Int8,
                                    DType::Bool,    DType::Complex64};
const std::vector<int64_t> kSizes = {0, 1, 1001, (1 << 20) + 3};

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = no_gpu_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    ProcessGroupOptions o;
    o.backend = "nccl";
    o.device_id = Device{DeviceType::CUDA, 0};
    o.timeout = 60s;
    pg = std::make_unique<ProcessGroup>(std::make_shared<HashStore>(), 0, 1, o);
  }
  std::unique_ptr<ProcessGroup> pg;
};

// At world size 1 every collective leaves this rank's data where the
// operation puts it: compared with the bytes computed here.
TEST_F(NcclGpu, EveryOperationEveryDTypeAndSize) {
  for (DType dtype : kDTypes)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + "[" + std::to_string(n) + "]");
      const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
      const auto in = pattern(dtype, n, 3);
      DeviceBuffer a(bytes), b(bytes);
      a.upload(in);
      const Tensor ta = a.tensor(dtype, n), tb = b.tensor(dtype, n);
      for (ReduceOp op : {ReduceOp(ReduceOp::SUM), ReduceOp(ReduceOp::MAX), ReduceOp(ReduceOp::MIN)}) {
        if (is_complex(dtype) && op.kind() != ReduceOp::SUM) continue;
        pg->all_reduce(ta, AllReduceOptions{.op = op, .async_op = false})->wait();
        EXPECT_EQ(a.download(), in) << "all_reduce " << op.name();
      }
      pg->broadcast(ta, BroadcastOptions{.root = 0, .async_op = false})->wait();
      EXPECT_EQ(a.download(), in) << "broadcast";
      pg->reduce(ta, ReduceOptions{.root = 0, .async_op = false})->wait();
      EXPECT_EQ(a.download(), in) << "reduce";
      b.upload(std::vector<unsigned char>(bytes, 0));
      pg->all_gather({tb}, ta, AllGatherOptions{.async_op = false})->wait();
      EXPECT_EQ(b.download(), in) << "all_gather";
      b.upload(std::vector<unsigned char>(bytes, 0));
      pg->all_gather_into_tensor(tb, ta, AllGatherOptions{.async_op = false})->wait();
      EXPECT_EQ(b.download(), in) << "all_gather_into_tensor";
      b.upload(std::vector<unsigned char>(bytes, 0));
      pg->gather({tb}, ta, GatherOptions{.root = 0, .async_op = false})->wait();
      EXPECT_EQ(b.download(), in) << "gather";
      b.upload(std::vector<unsigned char>(bytes, 0));
      pg->scatter(tb, {ta}, ScatterOptions{.root = 0, .async_op = false})->wait();
      EXPECT_EQ(b.download(), in) << "scatter";
      if (dtype != DType::Int16) {
        b.upload(std::vector<unsigned char>(bytes, 0));
        pg->reduce_scatter(tb, {ta}, ReduceScatterOptions{.async_op = false})->wait();
        EXPECT_EQ(b.download(), in) << "reduce_scatter";
        b.upload(std::vector<unsigned char>(bytes, 0));
        pg->reduce_scatter_tensor(tb, ta, ReduceScatterOptions{.async_op = false})->wait();
        EXPECT_EQ(b.download(), in) << "reduce_scatter_tensor";
      }
      b.upload(std::vector<unsigned char>(bytes, 0));
      pg->all_to_all({tb}, {ta}, AllToAllOptions{.async_op = false})->wait();
      EXPECT_EQ(b.download(), in) << "all_to_all";
      b.upload(std::vector<unsigned char>(bytes, 0));
      pg->all_to_all_single(tb, ta, AllToAllOptions{.async_op = false})->wait();
      EXPECT_EQ(b.download(), in) << "all_to_all_single";
      // In place: all_to_all_single with output == input stages the input.
      pg->all_to_all_single(ta, ta, AllToAllOptions{.async_op = false})->wait();
      EXPECT_EQ(a.download(), in) << "all_to_all_single in place";
    }
}

TEST_F(NcclGpu, AvgAndPremulSum) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const int64_t n = 1001;
    const auto in = pattern(dtype, n, 1);
    DeviceBuffer a(in.size());
    a.upload(in);
    pg->all_reduce(a.tensor(dtype, n), AllReduceOptions{.op = ReduceOp::AVG, .async_op = false})->wait();
    EXPECT_EQ(a.download(), in) << "AVG over one rank";
    pg->all_reduce(a.tensor(dtype, n), AllReduceOptions{.op = ReduceOp::premul_sum(2.0), .async_op = false})->wait();
    EXPECT_EQ(a.download(), scaled(dtype, in, 2.0)) << "PREMUL_SUM(2)";
  }
}

TEST_F(NcclGpu, AllReduceCoalescedAndBarrierAndFuture) {
  const auto x = pattern(DType::Float32, 17, 0), y = pattern(DType::Float32, 300, 2);
  DeviceBuffer a(x.size()), b(y.size());
  a.upload(x);
  b.upload(y);
  auto work = pg->all_reduce_coalesced({a.tensor(DType::Float32, 17), b.tensor(DType::Float32, 300)},
                                       AllReduceCoalescedOptions{});
  auto future = work->get_future();
  work->wait();
  future->wait();  // completed by the watchdog once the device is past it
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(a.download(), x);
  EXPECT_EQ(b.download(), y);
  pg->barrier(BarrierOptions{})->wait();
}

TEST_F(NcclGpu, RefusesBitwiseOpsNamingThem) {
  DeviceBuffer a(64);
  try {
    pg->all_reduce(a.tensor(DType::Int32, 16), AllReduceOptions{.op = ReduceOp::BAND});
    FAIL();
  } catch (const DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("BAND int32"), std::string::npos) << e.what();
  }
}

TEST(NcclGpuGroups, NewGroupAndSplitGroupSplitTheCommunicator) {
  REQUIRE_GPU();
  init_process_group(InitOptions{.backend = "nccl", .world_size = 1, .rank = 0,
                                 .store = std::make_shared<HashStore>(), .timeout = 60s,
                                 .device_id = Device{DeviceType::CUDA, 0}});
  const auto in = pattern(DType::Float32, 33, 4);
  DeviceBuffer a(in.size());
  a.upload(in);
  Group g = new_group({0});
  all_reduce(a.tensor(DType::Float32, 33), ReduceOp::SUM, g);
  EXPECT_EQ(a.download(), in);
  Group s = split_group(nullptr, {{0}});
  ASSERT_NE(s, nullptr);
  all_reduce(a.tensor(DType::Float32, 33), ReduceOp::MAX, s);
  EXPECT_EQ(a.download(), in);
  destroy_process_group();
}

// A send to itself and a receive from itself: two NCCL launches one after the
// other would leave the send waiting for a receive queued behind it; batched
// (batch_isend_irecv hands the batch to the backend) they run as one group.
TEST(NcclGpuGroups, BatchIsendIrecvRunsAsOneNcclGroup) {
  REQUIRE_GPU();
  init_process_group(InitOptions{.backend = "nccl", .world_size = 1, .rank = 0,
                                 .store = std::make_shared<HashStore>(), .timeout = 60s,
                                 .device_id = Device{DeviceType::CUDA, 0}});
  const auto in = pattern(DType::Int64, 4097, 2);
  DeviceBuffer a(in.size()), b(in.size());
  a.upload(in);
  b.upload(std::vector<unsigned char>(in.size(), 0));
  auto works = batch_isend_irecv({P2POp(P2POp::ISEND, a.tensor(DType::Int64, 4097), 0),
                                  P2POp(P2POp::IRECV, b.tensor(DType::Int64, 4097), 0)});
  for (auto& w : works) w->wait(std::chrono::milliseconds(60000));
  EXPECT_EQ(b.download(), in);
  destroy_process_group();
}

// The caller's stream is held up by a host function that waits for the test:
// the all_reduce ordered after it cannot run, and the watchdog fails it at its
// 500 ms timeout (and aborts the communicator) instead of leaving it hanging.
// (At world size 1 there is no peer to leave a receive unanswered.)
TEST_F(NcclGpu, WatchdogFailsAnOperationPastItsTimeout) {
  static std::atomic<bool> release{false};
  release = false;
  cudaStream_t blocked;
  ASSERT_EQ(cudaStreamCreateWithFlags(&blocked, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(
                blocked,
                [](void*) {
                  // Bounded: gives up after 120 s whatever happens.
                  for (int i = 0; i < 120000 && !release.load(); ++i)
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                },
                nullptr),
            cudaSuccess);
  DeviceBuffer a(64);
  std::shared_ptr<Work> work;
  {
    cuda::StreamGuard guard(blocked, 0);
    work = pg->all_reduce(a.tensor(DType::Float32, 16), AllReduceOptions{.timeout = 500ms});
  }
  for (int i = 0; i < 60000 && !work->is_completed(); ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(work->is_completed()) << "the watchdog did not fail the all_reduce within 60 s";
  try {
    std::rethrow_exception(work->exception());
  } catch (const DistBackendError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 0 in group default_pg: all_reduce #1 on cuda:0 timed out after 500 ms (nccl): "
                     "communicator aborted"),
              std::string::npos)
        << m;
  }
  release = true;
  // Later operations fail at once with that cause.
  try {
    pg->all_reduce(a.tensor(DType::Float32, 16), AllReduceOptions{.async_op = false})->wait();
    FAIL();
  } catch (const DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("failed earlier"), std::string::npos) << e.what();
  }
  cudaStreamSynchronize(blocked);
  cudaStreamDestroy(blocked);
}

}  // namespace
}  // namespace tdist
