// The tdist backend on CUDA tensors, with devices emulated in host memory
// (TDIST_EMULATE_CUDA=2, set in each rank before init): every collective and
// point-to-point operation against host-computed results, over world sizes
// 1..8 (ranks sharing the two devices), and across emulated hosts
// (TDIST_HOST_ID), where staging through host memory is the only path.
#include <gtest/gtest.h>

#include "device/device_world.h"

namespace tdist::testing {
namespace {

using namespace device_world;

// Past one staging chunk (2 MiB of float32), with an odd tail.
constexpr size_t kLarge = 600001;

class DeviceCollectives : public ::testing::TestWithParam<int> {};

TEST_P(DeviceCollectives, EveryOperationMatchesTheHostResult) {
  run_world(GetParam(), /*emulate=*/2, {}, [](int, int device) { check_every_operation(group_world(), device, kLarge); });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeviceCollectives, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

// Each path forced (TDIST_CUDA_PATH): the IPC path maps every rank's
// exchange buffer in every rank (and none exists when staging).
struct Forced {
  const char* path;
  int world;
};
class DeviceCollectivesForced : public ::testing::TestWithParam<Forced> {};

TEST_P(DeviceCollectivesForced, EveryOperationMatchesTheHostResult) {
  const Forced forced = GetParam();
  run_world(
      forced.world, 2, {},
      [&](int, int device) {
        check_every_operation(group_world(), device, kLarge);
        check_ipc_chunks(group_world(), device);
        const int want = std::string(forced.path) == "ipc" ? forced.world : 0;
        require(mapped_exchange_buffers() == want, std::string(forced.path) + ": " +
                                                       std::to_string(mapped_exchange_buffers()) +
                                                       " exchange buffers mapped, expected " + std::to_string(want));
        barrier()->wait();
      },
      forced.path);
}

INSTANTIATE_TEST_SUITE_P(Paths, DeviceCollectivesForced,
                         ::testing::Values(Forced{"ipc", 2}, Forced{"ipc", 3}, Forced{"ipc", 5}, Forced{"ipc", 8},
                                           Forced{"staged", 2}, Forced{"staged", 4}),
                         [](const auto& info) {
                           return std::string(info.param.path) + "_world" + std::to_string(info.param.world);
                         });

// TDIST_CUDA_WAIT=HOST: wait() blocks the host until the operation is done instead of making the
// stream wait on a host word (read when the group first uses a device: set before that).
TEST(DeviceCollectivesHostWait, EveryOperationMatchesTheHostResult) {
  run_world(3, 2, {}, [](int, int device) {
    setenv("TDIST_CUDA_WAIT", "HOST", 1);
    check_every_operation(group_world(), device, kLarge);
  });
}

// Two hosts of two ranks, and three hosts of one: the staged path under the
// hierarchical and the transport engines, across "hosts".
TEST(DeviceCollectivesAcrossHosts, TwoHostsOfTwo) {
  run_world(4, 2, {0, 0, 1, 1}, [](int, int device) { check_every_operation(group_world(), device, kLarge); });
}

TEST(DeviceCollectivesAcrossHosts, ThreeHostsOfOne) {
  run_world(3, 2, {0, 1, 2}, [](int, int device) { check_every_operation(group_world(), device, kLarge); });
}

// A subgroup's operations on device tensors, interleaved with CPU ones of the
// same group (one backend serves both devices: one issue order).
TEST(DeviceCollectivesSubgroups, InterleaveWithCpuOperations) {
  run_world(4, 2, {}, [](int rank, int device) {
    Group evens = new_group({0, 2});
    std::vector<int32_t> cpu(3, rank);
    all_reduce(Tensor(cpu.data(), cpu.size()), ReduceOp::SUM)->wait();
    require(cpu[0] == 6, "cpu all_reduce gave " + std::to_string(cpu[0]));
    if (rank % 2 == 0) all_reduce_case(device, evens, ReduceOp::SUM, DType::Float32, 1001);
    all_reduce_case(device, group_world(), ReduceOp::MAX, DType::Int32, 5);
  });
}

// A tensor said to be on cuda:1 where one device exists fails naming it.
TEST(DeviceCollectivesErrors, AMissingDeviceIsNamed) {
  run_world(2, /*emulate=*/1, {}, [](int, int) {
    std::vector<float> host(4);
    Tensor wrong(host.data(), DType::Float32, {4}, Device{DeviceType::CUDA, 1});
    try {
      all_reduce(wrong)->wait();
    } catch (const DistValueError& e) {
      require(contains(e.what(), "cuda:1"), std::string("the error does not name cuda:1: ") + e.what());
      // The group is still usable.
      all_reduce_case(0, group_world(), ReduceOp::SUM, DType::Float32, 3);
      return;
    }
    throw std::runtime_error("all_reduce on cuda:1 of one device did not fail");
  });
}

// Memory of device 0 labelled cuda:1 is refused too.
TEST(DeviceCollectivesErrors, MemoryOfAnotherDeviceIsRefused) {
  run_world(1, 2, {}, [](int, int) {
    DeviceMem mem(0, DType::Float32, 4);
    Tensor wrong(mem.tensor().data(), DType::Float32, {4}, Device{DeviceType::CUDA, 1});
    try {
      all_reduce(wrong)->wait();
    } catch (const DistValueError& e) {
      require(contains(e.what(), "cuda:0") && contains(e.what(), "cuda:1"), e.what());
      return;
    }
    throw std::runtime_error("all_reduce of cuda:0 memory labelled cuda:1 did not fail");
  });
}

}  // namespace
}  // namespace tdist::testing
