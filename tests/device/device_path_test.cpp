// What a group's device path (src/backends/device_path) keeps for reuse: its
// staging scratch, a pool of pinned blocks (powers of two from 4 KiB, leased
// smallest-first, never freed while the group lives: freeing pinned memory
// synchronizes the device, docs/cuda_data_paths.md), and its events. Devices
// are emulated in host memory.
#include <gtest/gtest.h>

#include <stdlib.h>

#include "backends/device_path/device_path.h"

namespace tdist::testing {
namespace {

class DevicePathPool : public ::testing::Test {
 protected:
  // Before the process's first device call, which makes the runtime once.
  static void SetUpTestSuite() { setenv("TDIST_EMULATE_CUDA", "1", 1); }
  DevicePath path{"rank 0 in group test"};
  void SetUp() override { path.runtime("test"); }
};

TEST_F(DevicePathPool, LeasesTheSmallestFreeBlockAndGrowsByPowersOfTwo) {
  {
    DevicePath::Lease a = path.scratch(100);  // a 4 KiB block
    EXPECT_NE(a.get(), nullptr);
    EXPECT_EQ(path.pooled_bytes(), 4096u);
    DevicePath::Lease b = path.scratch(100);  // the first is leased: another
    EXPECT_NE(a.get(), b.get());
    EXPECT_EQ(path.pooled_bytes(), 8192u);
    DevicePath::Lease c = path.scratch(5000);  // 8 KiB
    EXPECT_EQ(path.pooled_bytes(), 16384u);
    EXPECT_EQ(path.leased_blocks(), 3);
  }
  EXPECT_EQ(path.leased_blocks(), 0);
  // Nothing was freed; the smallest block that fits serves the next request.
  DevicePath::Lease small = path.scratch(4096);
  DevicePath::Lease larger = path.scratch(4097);
  EXPECT_EQ(path.pooled_bytes(), 16384u);
  DevicePath::Lease third = path.scratch(1);  // the other 4 KiB block, not a new one
  EXPECT_EQ(path.pooled_bytes(), 16384u);
  EXPECT_EQ(path.leased_blocks(), 3);
}

TEST_F(DevicePathPool, ReserveMakesAFreeBlockOnceAndScratchThenAllocatesNothing) {
  path.reserve(20000);  // 32 KiB
  EXPECT_EQ(path.pooled_bytes(), 32768u);
  path.reserve(20000);  // already there, free
  path.reserve(30000);
  EXPECT_EQ(path.pooled_bytes(), 32768u);
  {
    DevicePath::Lease held = path.scratch(20000);
    EXPECT_EQ(path.pooled_bytes(), 32768u);
    path.reserve(20000);  // the block is leased: a second one
    EXPECT_EQ(path.pooled_bytes(), 65536u);
  }
  // A moved lease returns its block once.
  DevicePath::Lease a = path.scratch(32768);
  DevicePath::Lease b = std::move(a);
  EXPECT_EQ(path.leased_blocks(), 1);
  b = DevicePath::Lease();
  EXPECT_EQ(path.leased_blocks(), 0);
  EXPECT_EQ(path.pooled_bytes(), 65536u);
}

// Events go back to the pool and come out again, per device, instead of a driver call each way.
TEST_F(DevicePathPool, EventsAreReusedPerDevice) {
  device::EventPool& events = path.events();
  device::EventHandle a = events.take(0), b = events.take(0);
  EXPECT_NE(a, b);
  EXPECT_EQ(events.kept(), 0u);
  events.give(0, a);
  events.give(0, b);
  EXPECT_EQ(events.kept(), 2u);
  device::EventHandle c = events.take(0);
  EXPECT_TRUE(c == a || c == b);
  EXPECT_EQ(events.kept(), 1u);
  events.give(0, c);
}

}  // namespace
}  // namespace tdist::testing
