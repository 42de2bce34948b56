// fp16 and bf16 conversions written from the IEEE bit patterns, for tests: the references the
// library's conversions and kernels are checked against (never the library's own code). Round
// to nearest, ties to even; NaN stays NaN (its payload is not part of the contract).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tpcomm::test {

inline std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float float_of(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// bf16 from binary32 bits: the high half, rounded to nearest, ties to even.
inline std::uint16_t bf16_from_bits(std::uint32_t x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40);  // NaN
  const std::uint32_t lower = x & 0xffffu;
  std::uint32_t upper = x >> 16;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) ++upper;  // may carry into inf
  return static_cast<std::uint16_t>(upper);
}

// IEEE binary16 from binary32 bits: normals, subnormals, overflow to infinity, ties to even.
inline std::uint16_t fp16_from_bits(std::uint32_t x) {
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN (payload not part of the contract)
  const int e = static_cast<int>(abs >> 23) - 127;
  if (e > 15) return sign | 0x7c00u;                      // infinity, or too large for binary16
  if (e < -25) return sign;                               // below half the smallest subnormal
  const std::uint32_t m = (abs & 0x7fffffu) | 0x800000u;  // 24 bits with the implicit one
  // Bits dropped: 13 for a normal result, more below 2^-14 (subnormal).
  const int shift = e >= -14 ? 13 : 13 + (-14 - e);
  std::uint32_t kept = m >> shift;
  const std::uint32_t dropped = m & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  if (dropped > half || (dropped == half && (kept & 1u))) ++kept;
  // A normal result's exponent field plus the mantissa; a carry out of the mantissa moves the
  // exponent up by one, and past the largest finite value to infinity.
  const std::uint32_t out =
      e >= -14 ? (static_cast<std::uint32_t>(e + 15) << 10) + (kept - 0x400u) : kept;
  return sign | static_cast<std::uint16_t>(out >= 0x7c00u ? 0x7c00u : out);
}

inline float float_from_bf16(std::uint16_t h) {
  return float_of(static_cast<std::uint32_t>(h) << 16);
}

inline float float_from_fp16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man x 2^-24, exact in binary32
    const float v = std::ldexp(static_cast<float>(man), -24);
    return float_of(bits_of(v) | sign);
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (man << 13));
  return float_of(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

inline std::uint16_t float_to_bf16(float v) {
  return bf16_from_bits(bits_of(v));
}
inline std::uint16_t float_to_fp16(float v) {
  return fp16_from_bits(bits_of(v));
}

}  // namespace tpcomm::test
