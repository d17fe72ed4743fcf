// The front and devices: a group maps each device to a backend, refuses a
// tensor of a device no backend of it serves (naming both), and refuses a
// device tensor whose memory is not where it says. CUDA is emulated in host
// memory (TDIST_EMULATE_CUDA=2, set before anything asks for a runtime), so
// this runs without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "device/device_runtime.h"
#include "process_group/coll_util.h"

namespace tdist::testing {
namespace {

// Before main: the runtime is made once, at its first use.
const bool emulated_cuda = setenv("TDIST_EMULATE_CUDA", "2", 1) == 0;

void require_message(const std::string& m, std::initializer_list<const char*> parts) {
  for (const char* p : parts) require(has(m, p), "error message lacks '" + std::string(p) + "': " + m);
}

// One device buffer of the emulated runtime, freed at the end.
struct DeviceFloats {
  explicit DeviceFloats(size_t n, int device = 0)
      : rt(device::require_runtime(DeviceType::CUDA, "test")), count(n), device(device) {
    ptr = rt.alloc_device(device, n * sizeof(float));
  }
  ~DeviceFloats() { rt.free_device(device, ptr); }
  Tensor tensor(int index = 0) const {
    return Tensor(ptr, DType::Float32, {static_cast<int64_t>(count)}, Device{DeviceType::CUDA, index});
  }
  device::Runtime& rt;
  size_t count;
  int device;
  void* ptr;
};

TEST(DeviceFront, ABackendSpecWithoutCudaRefusesCudaTensorsNamingDeviceAndBackend) {
  ASSERT_TRUE(emulated_cuda);
  DeviceFloats buf(4);
  with_thread_world(2, [&](ProcessGroup& pg) {
    std::string m = value_error_of([&] { pg.all_reduce(buf.tensor(), AllReduceOptions{}); }, "all_reduce of a cuda tensor");
    require_message(m, {"cuda:0", "cpu:tdist", "serves cpu (tdist)", "cpu:tdist,cuda:nccl"});
    // The group goes on serving CPU tensors.
    std::vector<float> v{1.0f};
    pg.all_reduce(v, AllReduceOptions{})->wait();
    require(v[0] == 2.0f, "the CPU all_reduce after the refusal is wrong");
  }, std::chrono::seconds(60), "cpu:tdist");
}

TEST(DeviceFront, ACudaTensorMustBeOnADeviceThisProcessHasAndWhereItSays) {
  ASSERT_TRUE(emulated_cuda);
  DeviceFloats buf(4);
  std::vector<float> host(4, 1.0f);
  with_thread_world(2, [&](ProcessGroup& pg) {
    std::string m = value_error_of([&] { pg.all_reduce(buf.tensor(2), AllReduceOptions{}); }, "a tensor on cuda:2");
    require_message(m, {"all_reduce", "2 cuda devices", "no cuda:2"});
    m = value_error_of([&] { pg.all_reduce(buf.tensor(1), AllReduceOptions{}); }, "cuda:0 memory labelled cuda:1");
    require_message(m, {"all_reduce", "says cuda:1", "on cuda:0"});
    m = value_error_of(
        [&] { pg.broadcast(Tensor(host.data(), DType::Float32, {4}, Device{DeviceType::CUDA, 0}), BroadcastOptions{}); },
        "host memory labelled cuda:0");
    require_message(m, {"broadcast", "says cuda:0", "host memory"});
    // An empty tensor has no memory to check.
    pg.all_reduce(Tensor(nullptr, DType::Float32, {0}, Device{DeviceType::CUDA, 0}), AllReduceOptions{})->wait();
  }, std::chrono::seconds(60), "cpu:tdist,cuda:tdist");
}

TEST(DeviceFront, OneCallTakesTensorsOfOneDevice) {
  DeviceFloats on0(8, 0), on1(4, 1);
  with_thread_world(2, [&](ProcessGroup& pg) {
    std::string m = value_error_of(
        [&] { pg.all_gather_into_tensor(on0.tensor(0), on1.tensor(1), AllGatherOptions{}); },
        "all_gather_into_tensor from cuda:1 into cuda:0");
    require_message(m, {"all_gather_into_tensor", "on cuda:0", "others on cuda:1"});
  }, std::chrono::seconds(60), "cpu:tdist,cuda:tdist");
}

TEST(DeviceFront, OneBackendNamedForTwoDevicesIsOneInstance) {
  with_thread_world(2, [&](ProcessGroup& pg) {
    require(&pg.backend_for(Device{DeviceType::CPU}) == &pg.backend_for(Device{DeviceType::CUDA, 0}),
            "'cpu:tdist,cuda:tdist' made two tdist backends");
  }, std::chrono::seconds(60), "cpu:tdist,cuda:tdist");
}

}  // namespace
}  // namespace tdist::testing
