// The sizes one copy moves, as the ranks of a group agree on them: each rank's
// settings, the text the ranks tell each other, and the narrowest range.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

#include "common/scoped_env.h"
#include "shm_engine/host_segment.h"

namespace tdist::testing {
namespace {

using shm_engine::SingleCopyRange;

TEST(SingleCopyRange, TheSettingsGiveTheRangeAndAMaximumOfZeroIsNoLimit) {
  {
    ScopedEnv least("TDIST_SHM_SINGLE_COPY_BYTES", "4096");
    ScopedEnv most("TDIST_SHM_SINGLE_COPY_MAX_BYTES", "65536");
    const SingleCopyRange r = SingleCopyRange::from_settings();
    EXPECT_EQ(r.bytes, 4096u);
    EXPECT_EQ(r.below, 65536u);
  }
  ScopedEnv unlimited("TDIST_SHM_SINGLE_COPY_MAX_BYTES", "0");
  EXPECT_EQ(SingleCopyRange::from_settings().below, SIZE_MAX);
}

TEST(SingleCopyRange, ItsTextReadsBackAndTheGroupTakesTheNarrowest) {
  const SingleCopyRange a{32768, 262144}, b{4096, SIZE_MAX};
  const SingleCopyRange back = SingleCopyRange::parse(b.text());
  EXPECT_EQ(back.bytes, b.bytes);
  EXPECT_EQ(back.below, b.below);
  const SingleCopyRange both = a.narrowed(b);
  EXPECT_EQ(both.bytes, 4096u);  // the smallest threshold, as before the limit existed
  EXPECT_EQ(both.below, 262144u);
  // A rank that never reads in place (0) turns one copy off for the group.
  EXPECT_EQ(a.narrowed(SingleCopyRange{0, SIZE_MAX}).bytes, 0u);
}

TEST(SingleCopyRange, TextThatIsNoRangeIsRefused) {
  EXPECT_THROW(SingleCopyRange::parse("32768"), std::invalid_argument);
  EXPECT_THROW(SingleCopyRange::parse("x-1"), std::invalid_argument);
  EXPECT_THROW(SingleCopyRange::parse("1-99999999999999999999999"), std::out_of_range);
}

}  // namespace
}  // namespace tdist::testing
