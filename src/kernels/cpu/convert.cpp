// Conversions to and from fp32.
#include "convert.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdint>
#include <limits>

namespace tpcomm {

namespace kernels::cpu {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// F16C converts eight halves per instruction, rounding to nearest even; without it _Float16
// conversions are a library call per element (tens of MB/s).
__attribute__((target("avx,f16c"))) void fp16_to_float_f16c(const std::uint16_t* s, float* d,
                                                            std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(d + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  }
  for (; i < n; ++i) d[i] = _cvtsh_ss(s[i]);
}

__attribute__((target("avx,f16c"))) void float_to_fp16_f16c(const float* s, std::uint16_t* d,
                                                            std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) d[i] = _cvtss_sh(s[i], _MM_FROUND_TO_NEAREST_INT);
}

bool have_f16c() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  }();
  return yes;
}
#else
bool have_f16c() {
  return false;
}
void fp16_to_float_f16c(const std::uint16_t*, float*, std::size_t) {}
void float_to_fp16_f16c(const float*, std::uint16_t*, std::size_t) {}
#endif

// Branchless so that it vectorises: round to nearest even, NaN stays a (quiet) NaN.
void float_to_bf16_block(const float* s, std::uint16_t* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &s[i], sizeof(bits));
    const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    const std::uint32_t quiet_nan = (bits >> 16) | 0x40u;
    d[i] = static_cast<std::uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

// Integers: exact up to 2^24, then fp32's nearest; back rounded to nearest even and clamped to
// the type's range, a NaN as 0 (a conversion for filling and checking buffers: integer calls
// never pass through fp32).
template <typename T>
void ints_to_float(const void* src, std::size_t count, float* dst) {
  const auto* s = static_cast<const T*>(src);
  for (std::size_t i = 0; i < count; ++i) dst[i] = static_cast<float>(s[i]);
}

template <typename T>
void ints_from_float(const float* src, std::size_t count, void* dst) {
  auto* d = static_cast<T*>(dst);
  constexpr auto lo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr auto hi = static_cast<double>(std::numeric_limits<T>::max());
  for (std::size_t i = 0; i < count; ++i) {
    const double v = std::nearbyint(static_cast<double>(src[i]));
    d[i] = std::isnan(v) ? T{0}
           : v <= lo     ? std::numeric_limits<T>::min()
           : v >= hi     ? std::numeric_limits<T>::max()
                         : static_cast<T>(v);
  }
}

}  // namespace
}  // namespace kernels::cpu

namespace kernels::cpu {

bool cpu_has_f16c() {
  return have_f16c();
}

void to_float_with(ConvertIsa isa, const void* src, DataType type, std::size_t count, float* dst) {
  if (count == 0) return;  // the buffers may be null
  switch (type) {
    case DataType::kFloat32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case DataType::kInt32:
      return ints_to_float<std::int32_t>(src, count, dst);
    case DataType::kInt64:
      return ints_to_float<std::int64_t>(src, count, dst);
    case DataType::kUInt8:
      return ints_to_float<std::uint8_t>(src, count, dst);
    case DataType::kFloat16:
    case DataType::kBFloat16:
      break;
  }
  const auto* s = static_cast<const std::uint16_t*>(src);
  if (type == DataType::kBFloat16) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = bf16_to_float(s[i]);
  } else if (isa == ConvertIsa::kF16c) {
    fp16_to_float_f16c(s, dst, count);
  } else {
    for (std::size_t i = 0; i < count; ++i) dst[i] = fp16_to_float(s[i]);
  }
}

void from_float_with(ConvertIsa isa, const float* src, DataType type, std::size_t count,
                     void* dst) {
  if (count == 0) return;  // the buffers may be null
  switch (type) {
    case DataType::kFloat32:
      std::memmove(dst, src, count * sizeof(float));
      return;
    case DataType::kInt32:
      return ints_from_float<std::int32_t>(src, count, dst);
    case DataType::kInt64:
      return ints_from_float<std::int64_t>(src, count, dst);
    case DataType::kUInt8:
      return ints_from_float<std::uint8_t>(src, count, dst);
    case DataType::kFloat16:
    case DataType::kBFloat16:
      break;
  }
  auto* d = static_cast<std::uint16_t*>(dst);
  if (type == DataType::kBFloat16) {
    float_to_bf16_block(src, d, count);
  } else if (isa == ConvertIsa::kF16c) {
    float_to_fp16_f16c(src, d, count);
  } else {
    for (std::size_t i = 0; i < count; ++i) d[i] = float_to_fp16(src[i]);
  }
}

}  // namespace kernels::cpu

namespace {
kernels::cpu::ConvertIsa best_convert_isa() {
  return kernels::cpu::cpu_has_f16c() ? kernels::cpu::ConvertIsa::kF16c
                                      : kernels::cpu::ConvertIsa::kScalar;
}
}  // namespace

void to_float(const void* src, DataType type, std::size_t count, float* dst) {
  kernels::cpu::to_float_with(best_convert_isa(), src, type, count, dst);
}

void from_float(const float* src, DataType type, std::size_t count, void* dst) {
  kernels::cpu::from_float_with(best_convert_isa(), src, type, count, dst);
}

}  // namespace tpcomm
