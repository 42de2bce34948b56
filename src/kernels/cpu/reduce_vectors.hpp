// The vector types the CPU reduction kernels are written in (GCC vector extensions of B bytes:
// 64 for the AVX-512 clone, 32 for AVX2, 16 for the baseline's SSE2) and their loads, stores and
// the generic bf16 rounding. Included by reduce.cpp and its bf16 pairs loop only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "reduce_kernels.hpp"

namespace tpcomm::kernels::cpu::variants {

// The vector types of each width, spelled out per width: GCC drops vector_size from an alias
// template whose size depends on its parameter.
template <int B>
struct Vectors;
#define TPCOMM_VECTORS(BYTES)                                                              \
  template <>                                                                              \
  struct Vectors<BYTES> {                                                                  \
    using F = float __attribute__((vector_size(BYTES)));                                   \
    using U32 = std::uint32_t __attribute__((vector_size(BYTES)));                         \
    using U16 = std::uint16_t __attribute__((vector_size(BYTES / 2))); /* as many lanes */ \
    using Words = std::uint16_t __attribute__((vector_size(BYTES)));   /* twice as many */ \
  };
TPCOMM_VECTORS(64)
TPCOMM_VECTORS(32)
TPCOMM_VECTORS(16)
#undef TPCOMM_VECTORS
template <int B>
using VecF = typename Vectors<B>::F;
template <int B>
using VecU32 = typename Vectors<B>::U32;
template <int B>
using VecU16 = typename Vectors<B>::U16;
template <int B>
using VecWords = typename Vectors<B>::Words;

template <int B>
TPCOMM_INLINE VecF<B> load_f32(const void* p) {
  VecF<B> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <int B>
TPCOMM_INLINE VecF<B> bits_to_f32(VecU32<B> bits) {
  VecF<B> v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

template <int B>
TPCOMM_INLINE VecF<B> load_bf16(const void* p) {
  VecU16<B> h;
  std::memcpy(&h, p, sizeof(h));
  return bits_to_f32<B>(__builtin_convertvector(h, VecU32<B>) << 16);
}

// Round to nearest even, quiet NaNs: float_to_bf16 in convert.hpp, a register at once. The bf16
// bits end up in the low half of each lane.
template <int B>
TPCOMM_INLINE VecU32<B> round_to_bf16(VecF<B> v) {
  VecU32<B> bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const VecU32<B> rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const VecU32<B> nan = (bits >> 16) | 0x40u;
  return (bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
}

template <int B>
TPCOMM_INLINE void store_bf16(void* p, VecF<B> v) {
  const VecU16<B> h = __builtin_convertvector(round_to_bf16<B>(v), VecU16<B>);
  std::memcpy(p, &h, sizeof(h));
}

template <int B>
TPCOMM_INLINE VecU32<B> load_u32(const void* p) {
  VecU32<B> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <bool Bf16, int B>
TPCOMM_INLINE VecF<B> load_elements(const void* p) {
  if constexpr (Bf16) {
    return load_bf16<B>(p);
  } else {
    return load_f32<B>(p);
  }
}

}  // namespace tpcomm::kernels::cpu::variants
