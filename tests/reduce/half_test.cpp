// float16 / bfloat16 <-> float conversions: exhaustive round trips, rounding, NaN and Inf.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "tdist/dtype.h"
#include "tensor/half.h"

namespace tdist {
namespace {

bool half_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }
bool bf16_is_nan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x007F) != 0; }

TEST(Float16Conversion, AllHalfBitPatternsRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = to_float(Half{h});
    const uint16_t back = to_half(f).bits;
    if (half_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      ASSERT_TRUE(half_is_nan(back)) << std::hex << i;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << "sign of NaN " << std::hex << i;
    } else {
      ASSERT_EQ(back, h) << std::hex << i << " -> " << f;
    }
  }
}

TEST(Float16Conversion, AllBFloat16BitPatternsRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto b = static_cast<uint16_t>(i);
    const float f = to_float(BFloat16{b});
    EXPECT_EQ(std::bit_cast<uint32_t>(f), i << 16);  // widening is exact, bit for bit
    const uint16_t back = to_bfloat16(f).bits;
    if (bf16_is_nan(b)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      ASSERT_TRUE(bf16_is_nan(back)) << std::hex << i;
      ASSERT_EQ(back & 0x8000, b & 0x8000) << "sign of NaN " << std::hex << i;
    } else {
      ASSERT_EQ(back, b) << std::hex << i << " -> " << f;
    }
  }
}

TEST(Float16Conversion, HalfKnownValues) {
  EXPECT_EQ(to_float(Half{0x0000}), 0.0f);
  EXPECT_TRUE(std::signbit(to_float(Half{0x8000})));
  EXPECT_EQ(to_float(Half{0x3C00}), 1.0f);
  EXPECT_EQ(to_float(Half{0xC000}), -2.0f);
  EXPECT_EQ(to_float(Half{0x7BFF}), 65504.0f);
  EXPECT_EQ(to_float(Half{0x0400}), 0x1p-14f);  // smallest normal
  EXPECT_EQ(to_float(Half{0x0001}), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(to_float(Half{0x03FF}), 0x3FFp-24f);  // largest subnormal
  EXPECT_EQ(to_float(Half{0x7C00}), std::numeric_limits<float>::infinity());
  EXPECT_EQ(to_float(Half{0xFC00}), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(to_float(Half{0x7E00})));
  EXPECT_TRUE(std::isnan(to_float(Half{0x7C01})));  // signalling NaN stays NaN
}

TEST(Float16Conversion, HalfRoundsToNearestEven) {
  EXPECT_EQ(to_half(1.0f + 0x1p-11f).bits, 0x3C00);        // tie, even is 1.0
  EXPECT_EQ(to_half(1.0f + 3 * 0x1p-11f).bits, 0x3C02);    // tie, even is 1 + 2^-9
  EXPECT_EQ(to_half(1.0f + 0x1p-11f + 0x1p-20f).bits, 0x3C01);  // above the tie
  EXPECT_EQ(to_half(65519.0f).bits, 0x7BFF);
  EXPECT_EQ(to_half(65520.0f).bits, 0x7C00);  // the tie rounds to Inf
  EXPECT_EQ(to_half(1e10f).bits, 0x7C00);
  EXPECT_EQ(to_half(-1e10f).bits, 0xFC00);
  EXPECT_EQ(to_half(std::numeric_limits<float>::infinity()).bits, 0x7C00);
  EXPECT_EQ(to_half(0x1p-25f).bits, 0x0000);  // half of the smallest subnormal: tie to 0
  EXPECT_EQ(to_half(0x1p-25f * 1.0001f).bits, 0x0001);
  EXPECT_EQ(to_half(3 * 0x1p-25f).bits, 0x0002);  // subnormal tie to even
  EXPECT_EQ(to_half(-1e-10f).bits, 0x8000);      // underflow keeps the sign
  EXPECT_EQ(to_half(std::numeric_limits<float>::quiet_NaN()).bits & 0x7FFF, 0x7E00);
  EXPECT_EQ(to_half(-std::numeric_limits<float>::quiet_NaN()).bits, 0xFE00);
  EXPECT_TRUE(half_is_nan(to_half(std::bit_cast<float>(0x7F800001u)).bits));  // NaN with a low payload
}

#ifdef __FLT16_MAX__
// Against the compiler's own conversion (libgcc, exact round-to-nearest-even).
TEST(Float16Conversion, HalfMatchesCompilerFloat16) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2'000'000; ++i) {
    const uint32_t bits = i < (1 << 16) ? (static_cast<uint32_t>(i) << 16) | (rng() & 0xFFFF) : rng();
    const float f = std::bit_cast<float>(bits);
    const auto ref = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    const uint16_t got = to_half(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(half_is_nan(got)) << std::hex << bits;
    } else {
      ASSERT_EQ(got, ref) << std::hex << bits;
    }
  }
}
#endif

TEST(Float16Conversion, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(to_bfloat16(std::bit_cast<float>(0x3F808000u)).bits, 0x3F80);  // tie, even
  EXPECT_EQ(to_bfloat16(std::bit_cast<float>(0x3F818000u)).bits, 0x3F82);  // tie, even
  EXPECT_EQ(to_bfloat16(std::bit_cast<float>(0x3F808001u)).bits, 0x3F81);  // above the tie
  EXPECT_EQ(to_bfloat16(std::numeric_limits<float>::max()).bits, 0x7F80);  // rounds to Inf
  EXPECT_EQ(to_bfloat16(-std::numeric_limits<float>::max()).bits, 0xFF80);
  EXPECT_EQ(to_bfloat16(std::numeric_limits<float>::infinity()).bits, 0x7F80);
  EXPECT_EQ(to_bfloat16(std::numeric_limits<float>::denorm_min()).bits, 0x0000);
  EXPECT_TRUE(bf16_is_nan(to_bfloat16(std::bit_cast<float>(0x7F800001u)).bits));  // not rounded into Inf
  EXPECT_TRUE(bf16_is_nan(to_bfloat16(std::bit_cast<float>(0xFFFFFFFFu)).bits));  // not wrapped to 0
  EXPECT_EQ(to_bfloat16(-std::numeric_limits<float>::quiet_NaN()).bits & 0x8000, 0x8000);
}

// Random floats against a reference that rounds through the exact rational value.
TEST(Float16Conversion, BFloat16MatchesReference) {
  std::mt19937 rng(11);
  for (int i = 0; i < 1'000'000; ++i) {
    const uint32_t u = rng();
    const float f = std::bit_cast<float>(u);
    if (std::isnan(f)) continue;
    // Reference: truncate, then look at the dropped 16 bits.
    uint32_t up = u >> 16;
    const uint32_t rest = u & 0xFFFF;
    if (rest > 0x8000 || (rest == 0x8000 && (up & 1))) ++up;
    ASSERT_EQ(to_bfloat16(f).bits, static_cast<uint16_t>(up)) << std::hex << u;
  }
}

// The vectorizable inline forms used by the kernels are the same functions.
TEST(Float16Conversion, InlineFormsAgree) {
  for (uint32_t i = 0; i < 65536; i += 37) {
    EXPECT_EQ(std::bit_cast<uint32_t>(detail::half_bits_to_float(static_cast<uint16_t>(i))),
              std::bit_cast<uint32_t>(to_float(Half{static_cast<uint16_t>(i)})));
  }
}

}  // namespace
}  // namespace tdist
