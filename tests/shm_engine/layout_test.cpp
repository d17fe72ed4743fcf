// The segment's layout for groups of every size: post payloads of kPostBytes
// up to 128 ranks and smaller beyond, parts that do not overlap, and a total
// within kMaxTotal wherever the smallest slots allow it.
#include <gtest/gtest.h>

#include "shm_engine/layout.h"

namespace tdist::testing {
namespace {

using shm_engine::kMaxPostRegion;
using shm_engine::kPostBytes;
using shm_engine::kPostDepth;
using shm_engine::Layout;

TEST(Layout, PostPayloadsShrinkOnlyWhereTheirRegionWouldOutgrowItsLimit) {
  EXPECT_EQ(Layout::for_group(2, 512 << 10).post_bytes(), kPostBytes);
  EXPECT_EQ(Layout::for_group(128, 512 << 10).post_bytes(), kPostBytes);
  EXPECT_EQ(Layout::for_group(129, 512 << 10).post_bytes(), kPostBytes / 2);
  EXPECT_EQ(Layout::for_group(256, 512 << 10).post_bytes(), kPostBytes / 2);
  EXPECT_EQ(Layout::for_group(4096, 512 << 10).post_bytes(), 64u);
  EXPECT_EQ(Layout::for_group(4097, 512 << 10).post_bytes(), 0u) << "below 64 bytes posts carry words only";
  for (int n : {2, 3, 8, 100, 129, 300, 1000, 5000}) {
    const Layout l = Layout::for_group(n, 512 << 10);
    EXPECT_LE(static_cast<size_t>(n) * kPostDepth * l.post_bytes(), kMaxPostRegion) << n << " ranks";
    EXPECT_EQ(l.payload_offset(n - 1, kPostDepth - 1) + l.post_bytes(), l.directory_offset()) << n << " ranks";
    EXPECT_LT(l.posts_offset(), l.payloads_offset()) << n << " ranks";
    EXPECT_LE(l.directory_offset(), l.data_offset()) << n << " ranks";
  }
}

// Up to 256 ranks the slots fit the rest of kMaxTotal; beyond, where even
// the smallest slots (256 bytes a rank) do not, the slots are the smallest
// rather than the size asked for (the cap once wrapped below zero).
TEST(Layout, SlotsFitTheTotalOrAreTheSmallestAllowed) {
  for (int n : {2, 8, 64, 128, 256}) {
    const Layout l = Layout::for_group(n, 512 << 10);
    EXPECT_LE(l.total_bytes(), Layout::kMaxTotal) << n << " ranks";
    EXPECT_GT(l.slot_bytes, 0u);
  }
  for (int n : {600, 2000}) {
    const Layout l = Layout::for_group(n, 512 << 10);
    EXPECT_EQ(l.slot_bytes, (256 * static_cast<size_t>(n) + 4095) / 4096 * 4096) << n << " ranks";
  }
}

}  // namespace
}  // namespace tdist::testing
