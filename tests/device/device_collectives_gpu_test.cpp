// The device collectives of device_collectives_test.cpp on a real GPU: 2, 4
// and 8 ranks sharing the one device (scripts/gpu_check.sh runs it, label
// "gpu"). Skips with the reason where there is no CUDA device.
#include <gtest/gtest.h>

#include "device/device_world.h"

namespace tdist::testing {
namespace {

using namespace device_world;

// Asked in a child: CUDA must not be initialised in the parent before it forks.
std::string no_device_reason() {
  Shared<std::array<char, 512>> reason;
  auto results = run_in_processes(1, [&](int) {
    unsetenv("TDIST_EMULATE_CUDA");
    auto* runtime = device::runtime(DeviceType::CUDA);
    std::string why = runtime == nullptr ? (device::built_with_cuda() ? "this build's CUDA runtime is not available"
                                                                      : "tdist was built without CUDA")
                      : runtime->device_count() == 0 ? "no CUDA device: " + runtime->unavailable_reason()
                                                     : "";
    std::snprintf(reason->data(), reason->size(), "%s", why.c_str());
  });
  if (!results[0].ok()) return "the probe failed: " + results[0].describe();
  return reason->data();
}

class DeviceCollectivesGpu : public ::testing::TestWithParam<int> {};

TEST_P(DeviceCollectivesGpu, EveryOperationMatchesTheHostResult) {
  const std::string why = no_device_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  run_world(GetParam(), /*emulate=*/0, {}, [](int, int device) { check_every_operation(group_world(), device, 600001); });
}

INSTANTIATE_TEST_SUITE_P(RanksOnOneGpu, DeviceCollectivesGpu, ::testing::Values(2, 4, 8),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

}  // namespace
}  // namespace tdist::testing
