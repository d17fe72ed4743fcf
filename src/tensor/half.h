// Branch-free conversions between float and the 16-bit floating types, written so that
// GCC vectorizes loops over them (selects, shifts and float multiplies; no branches).
// float16 after Maratyszcza's FP16 library (the algorithm c10::Half uses); bfloat16 by
// round-to-nearest-even on the upper half of the float bits.
#pragma once

#include <bit>
#include <cstdint>

namespace tdist::detail {

// c ? a : b on bits, spelled with masks: a ternary between values computed with float
// operations becomes control flow that GCC will not if-convert under -ftrapping-math (the
// default), which would keep the conversion loops scalar.
inline uint32_t select_bits(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (a & m) | (b & ~m);
}

// Exact: every half (normal, subnormal, +-0, +-Inf, NaN) has a float.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t w = uint32_t(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  // Normals, Inf and NaN: move the exponent into place, then rescale by 2^-112.
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = std::bit_cast<float>((two_w >> 4) + exp_offset) * exp_scale;
  // Subnormals: mantissa into a float of exponent 2^-1, subtract the 0.5 bias.
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = std::bit_cast<float>((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result = sign | select_bits(two_w < denormalized_cutoff, std::bit_cast<uint32_t>(denormalized),
                                             std::bit_cast<uint32_t>(normalized));
  return std::bit_cast<float>(result);
}

// Round to nearest even; overflow gives +-Inf; NaN gives the quiet NaN 0x7E00 with its sign.
inline uint16_t float_to_half_bits(float f) {
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  const uint32_t w = std::bit_cast<uint32_t>(f);
  const float abs_f = std::bit_cast<float>(w & 0x7FFFFFFFu);
  float base = (abs_f * scale_to_inf) * scale_to_zero;  // saturates to Inf beyond the half range
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  // Adding 2^(e+13) makes the FPU round the mantissa to 10 bits (nearest even).
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return uint16_t((sign >> 16) | select_bits(shl1_w > 0xFF000000u, 0x7E00u, nonsign));
}

inline float bfloat16_bits_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

// Round to nearest even; NaN stays NaN (quiet bit set, sign kept); Inf stays Inf.
inline uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return uint16_t((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}

}  // namespace tdist::detail
