// Element values of float32, bfloat16 and float16 buffers for tests, through the bit-pattern
// conversions of reference_float.hpp (never the library's own): rounding, loads and stores, and
// the value generator and float64 tolerance of the all_reduce_rmsnorm checks (CPU and GPU).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/reference_float.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::test {

// The type's nearest value to f (round to nearest even).
inline float rounded(DataType t, float f) {
  if (t == DataType::kFloat32) return f;
  return t == DataType::kBFloat16 ? float_from_bf16(float_to_bf16(f))
                                  : float_from_fp16(float_to_fp16(f));
}

inline void store(DataType t, std::vector<std::uint8_t>& b, std::size_t i, float v) {
  if (t == DataType::kFloat32) {
    std::memcpy(b.data() + 4 * i, &v, 4);
    return;
  }
  const std::uint16_t h = t == DataType::kBFloat16 ? float_to_bf16(v) : float_to_fp16(v);
  std::memcpy(b.data() + 2 * i, &h, 2);
}

inline float load(DataType t, const std::vector<std::uint8_t>& b, std::size_t i) {
  if (t == DataType::kFloat32) {
    float v = 0;
    std::memcpy(&v, b.data() + 4 * i, 4);
    return v;
  }
  std::uint16_t h = 0;
  std::memcpy(&h, b.data() + 2 * i, 2);
  return t == DataType::kBFloat16 ? float_from_bf16(h) : float_from_fp16(h);
}

inline std::vector<std::uint8_t> encode(DataType t, const std::vector<float>& v) {
  std::vector<std::uint8_t> b(v.size() * size_of(t));
  for (std::size_t i = 0; i < v.size(); ++i) store(t, b, i, v[i]);
  return b;
}

// all_reduce_rmsnorm's data: a value in [-2, 2) of the type for (who, i): rank r's input who = r,
// the residual who = -1, the weight who = -2 (in [0.5, 2.5), the same on every rank).
inline float norm_value(DataType t, int who, std::size_t i) {
  std::uint64_t x = (static_cast<std::uint64_t>(who + 3) << 40) ^ (i * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 32;
  const float f = static_cast<float>(x % 65536) / 16384.0f - 2.0f;
  return rounded(t, who == -2 ? f / 2 + 1.5f : f);
}

inline std::vector<std::uint8_t> norm_values(DataType t, int who, std::size_t n) {
  std::vector<std::uint8_t> b(n * size_of(t));
  for (std::size_t i = 0; i < n; ++i) store(t, b, i, norm_value(t, who, i));
  return b;
}

// How far a result may lie from its float64 reference `ref`, whose inputs' magnitudes add up to
// `scale`: 2e-5 of that for float32, 2 units in the last place of the type at |ref| for 16-bit
// types (at least its smallest normal's).
inline double norm_tolerance(DataType t, double ref, double scale) {
  if (t == DataType::kFloat32) return 2e-5 * std::max(std::fabs(ref), scale);
  const int mantissa = t == DataType::kBFloat16 ? 7 : 10;
  const int min_exp = t == DataType::kBFloat16 ? -126 : -14;
  const int e =
      std::max(static_cast<int>(std::floor(std::log2(std::max(std::fabs(ref), 1e-30)))), min_exp);
  return 2 * std::ldexp(1.0, e - mantissa);
}

// Deterministic mode's checks (CPU and GPU): rank r's element i, a full-mantissa value of mixed
// magnitude (2^-4 to 2^8), already of the type, so that a sum in another order than rank order
// rounds differently somewhere in a few thousand elements.
inline float order_value(DataType t, int r, std::size_t i) {
  std::uint64_t x = (static_cast<std::uint64_t>(r + 1) << 40) ^ (i * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 29;
  const float mantissa = static_cast<float>(x % 1000003) / 1000003.0f - 0.5f;
  return rounded(t, std::ldexp(mantissa, static_cast<int>((x >> 24) % 12) - 3));
}

// Elements [from, from + n) of rank r's order values, as bytes of the type.
inline std::vector<std::uint8_t> order_values(DataType t, int r, std::size_t from, std::size_t n) {
  std::vector<std::uint8_t> b(n * size_of(t));
  for (std::size_t i = 0; i < n; ++i) store(t, b, i, order_value(t, r, from + i));
  return b;
}

// Their sum over ranks 0..world-1 in rank order, accumulated in fp32 and rounded once to the type:
// what deterministic mode promises, computed here from the rounded inputs.
inline std::vector<std::uint8_t> rank_order_sums(DataType t, int world, std::size_t from,
                                                 std::size_t n) {
  std::vector<std::uint8_t> b(n * size_of(t));
  for (std::size_t i = 0; i < n; ++i) {
    float acc = order_value(t, 0, from + i);
    for (int r = 1; r < world; ++r) acc += order_value(t, r, from + i);
    store(t, b, i, acc);
  }
  return b;
}

}  // namespace tpcomm::test
