// The bfloat16 reduction of the AVX512-BF16 variant (reduce_kernels.hpp): the generic
// AVX-512 loop (bf16 pairs widened in place, fp32 accumulation in rank order), but the rounding
// back to bf16 done by vcvtne2ps2bf16, one instruction for two registers where the integer
// rounding takes about twenty. That instruction rounds to nearest even and quiets NaNs exactly as
// float_to_bf16 does, with one difference: it reads denormal inputs as zero. Registers holding a
// denormal or zero (exponent 0; zeros round the same either way) take the integer rounding, so
// every result is bit for bit the other variants' and ranks on different CPUs still agree.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/convert.hpp"
#include "reduce_kernels.hpp"

namespace tpcomm::kernels::cpu::variants {

#if defined(TPCOMM_HAVE_BF16_NATIVE)
namespace {

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4,avx512bf16")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593, as in reduce_f16.cpp
using V = float __attribute__((vector_size(64)));
using U = std::uint32_t __attribute__((vector_size(64)));

TPCOMM_INLINE U bits_of(V v) {
  U u;
  std::memcpy(&u, &v, sizeof(u));
  return u;
}
TPCOMM_INLINE V floats_of(U u) {
  V v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
}

// float_to_bf16 on a register, the bits in each lane's low half (the slow path).
TPCOMM_INLINE U round_integer(U bits) {
  const U rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const U nan = (bits >> 16) | 0x40u;
  return (bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
}

// Lane i of the result: bf16(even[i]) in its low half, bf16(odd[i]) in its high half.
TPCOMM_INLINE U pack_pairs(V even, V odd) {
  const U e = bits_of(even), o = bits_of(odd);
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  const __mmask16 tiny = static_cast<__mmask16>(_mm512_testn_epi32_mask((__m512i)e, exponent) |
                                                _mm512_testn_epi32_mask((__m512i)o, exponent));
  if (__builtin_expect(tiny != 0, 0)) return round_integer(e) | (round_integer(o) << 16);
  // Words 0-15: the even elements, 16-31: the odd ones; interleaved back into pairs.
  const __m512bh both = _mm512_cvtne2ps_pbh(floats_of(o), floats_of(e));
  static const std::uint16_t kInterleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i packed = _mm512_permutexvar_epi16(_mm512_loadu_si512(kInterleave), (__m512i)both);
  return (U)packed;
}

// Ranks: the rank count when known at compile time (sums of 2 or 4), as in the generic loop.
template <int Op, bool Avg, int Ranks = 0>
void reduce_bf16_native(const void* const* srcs, int ranks, std::size_t n, void* out, float w) {
  if constexpr (Ranks != 0) ranks = Ranks;
  auto at = [](const void* p, std::size_t i) { return static_cast<const char*>(p) + i * 2; };
  auto one = [&](std::size_t i) TPCOMM_INLINE_LAMBDA {
    U pairs;
    std::memcpy(&pairs, at(srcs[0], i), sizeof(pairs));
    V even = floats_of(pairs << 16);
    V odd = floats_of(pairs & 0xffff0000u);
    for (int r = 1; r < ranks; ++r) {
      std::memcpy(&pairs, at(srcs[r], i), sizeof(pairs));
      even = apply<Op>(even, floats_of(pairs << 16));
      odd = apply<Op>(odd, floats_of(pairs & 0xffff0000u));
    }
    if constexpr (Avg) {
      even = even / w;
      odd = odd / w;
    }
    const U packed = pack_pairs(even, odd);
    std::memcpy(static_cast<char*>(out) + i * 2, &packed, sizeof(packed));
  };
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {  // a register is a cache line
    prefetch_line_ahead<2>(srcs, ranks, i, n);
    one(i);
  }
  for (; i < n; ++i) {  // the scalar reference conversions: the same rounding
    auto value = [&](int r) {
      return bf16_to_float(static_cast<const std::uint16_t*>(srcs[r])[i]);
    };
    float acc = value(0);
    for (int r = 1; r < ranks; ++r) acc = apply<Op>(acc, value(r));
    if constexpr (Avg) acc = acc / w;
    static_cast<std::uint16_t*>(out)[i] = float_to_bf16(acc);
  }
}
#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace

TPCOMM_TARGET_AVX512BF16 void reduce_bf16_avx512bf16(const void* const* srcs, int ranks,
                                                     std::size_t n, void* out, int code, bool avg) {
  const auto w = static_cast<float>(ranks);
  if (avg) return reduce_bf16_native<0, true>(srcs, ranks, n, out, w);
  if (code == 1) return reduce_bf16_native<1, false>(srcs, ranks, n, out, w);
  if (code == 2) return reduce_bf16_native<2, false>(srcs, ranks, n, out, w);
  if (ranks == 2) return reduce_bf16_native<0, false, 2>(srcs, ranks, n, out, w);
  if (ranks == 4) return reduce_bf16_native<0, false, 4>(srcs, ranks, n, out, w);
  reduce_bf16_native<0, false>(srcs, ranks, n, out, w);
}
#endif

}  // namespace tpcomm::kernels::cpu::variants
