// Element conversion between the wire types and fp32, the type every reduction accumulates in.
// fp16 and bf16 round to nearest even.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "tpcomm/convert.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::kernels::cpu {

inline float bf16_to_float(std::uint16_t v) {
  std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float fp16_to_float(std::uint16_t v) {
  _Float16 h;
  std::memcpy(&h, &v, sizeof(h));
  return static_cast<float>(h);
}

inline std::uint16_t float_to_fp16(float f) {
  _Float16 h = static_cast<_Float16>(f);  // IEEE conversion: round to nearest even
  std::uint16_t v;
  std::memcpy(&v, &h, sizeof(v));
  return v;
}

// The fp16 conversions' two variants: F16C instructions, or one element at a time through
// _Float16 (every other machine). The public to_float / from_float use the best this CPU has;
// these call one by name (tests), the caller checking cpu_has_f16c() for kF16c.
enum class ConvertIsa { kScalar, kF16c };
bool cpu_has_f16c();
void to_float_with(ConvertIsa isa, const void* src, DataType type, std::size_t count, float* dst);
void from_float_with(ConvertIsa isa, const float* src, DataType type, std::size_t count, void* dst);

// The array conversions are public (tpcomm/convert.hpp); the kernels and backends use them
// unqualified.
using tpcomm::from_float;
using tpcomm::to_float;

}  // namespace tpcomm::kernels::cpu
