// The bf16 loop of the generic reduction kernels (reduce.cpp): bf16 pairs, two elements per
// 32-bit lane, an even element in the lane's low half and the next odd one in its high half. Both
// widen to fp32 in place (a shift, a mask) and pack back with word operations, so bf16 needs no
// lane shuffles at all (with the AVX-512 clone built for x86-64-v4, about 2x faster than widening
// a register of elements with a conversion).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "reduce_vectors.hpp"

namespace tpcomm::kernels::cpu::variants {

template <int B>
TPCOMM_INLINE VecF<B> bf16_even(VecU32<B> pairs) {
  return bits_to_f32<B>(pairs << 16);
}
template <int B>
TPCOMM_INLINE VecF<B> bf16_odd(VecU32<B> pairs) {
  return bits_to_f32<B>(pairs & 0xffff0000u);
}
// (A load two bytes earlier holds the even elements in its lanes' high halves, so a mask could
// widen them instead of a shift, which runs on only two of Zen 4's four vector pipes: 8% faster
// alone. But that load overlaps the previous register's store in the low 12 address bits whenever
// source and output sit at the same offset in their pages, as lanes and large buffers do, and then
// waits for the store: reduce_bench, whose buffers do, ran 25% slower.)
// Lane by lane, the low word of `low_from` and the high word of `high_from`: one vpblendw (AVX2)
// or masked move (AVX-512). (SSE2 has no word blend: pack_tops and pack_lows mask and or there.)
template <int B, std::size_t... K>
constexpr VecWords<B> odd_words_from_second(std::index_sequence<K...>) {
  return VecWords<B>{static_cast<std::uint16_t>(K % 2 == 0 ? K : B / 2 + K)...};
}
template <int B>
TPCOMM_INLINE VecU32<B> blend_words(VecU32<B> low_from, VecU32<B> high_from) {
  static_assert(B >= 32, "SSE2 has no word blend");
  VecWords<B> lw;
  VecWords<B> hw;
  std::memcpy(&lw, &low_from, sizeof(lw));
  std::memcpy(&hw, &high_from, sizeof(hw));
  constexpr VecWords<B> kMask = odd_words_from_second<B>(std::make_index_sequence<B / 2>());
  const VecWords<B> blended = __builtin_shuffle(lw, hw, kMask);
  VecU32<B> result;
  std::memcpy(&result, &blended, sizeof(result));
  return result;
}

// The fp32 bits of each lane's even and odd results, packed: pack_tops truncated to bf16 (the
// even's top half in the low word, the odd's in the high), pack_lows the 16 bits below each. The
// SSE2 forms leave out the masks the shifts make needless (GCC keeps them otherwise).
template <int B>
TPCOMM_INLINE VecU32<B> pack_tops(VecU32<B> even, VecU32<B> odd) {
  if constexpr (B == 16) {
    return (even >> 16) | (odd & 0xffff0000u);
  } else {
    return blend_words<B>(even >> 16, odd);
  }
}
template <int B>
TPCOMM_INLINE VecU32<B> pack_lows(VecU32<B> even, VecU32<B> odd) {
  if constexpr (B == 16) {
    return (even & 0xffffu) | (odd << 16);
  } else {
    return blend_words<B>(even, odd << 16);
  }
}

// Round to nearest even on 16-bit words: `top` holds results truncated to bf16, `low` the 16 bits
// below each. One is added where low > 0x8000, or low == 0x8000 under an odd top: exactly where
// low minus (1 if top is even, else 0), saturated at zero, has its top bit set. Four word
// operations; GCC's vector extensions have no saturating subtraction, so intrinsics per width.
// The AVX2 one (and the AVX-512 pack below) carry their target and are plain inline: GCC refuses
// an always_inline callee whose target the (generic) caller lacks, but inlines these into the ISA
// clone once the always_inline callers, lambdas included (TPCOMM_INLINE_LAMBDA), are in it. Without
// that they stayed calls, one per register, and the AVX2 bf16 sum ran about 20% slower.
#if defined(TPCOMM_X86_VARIANTS)
TPCOMM_INLINE VecU32<16> add_rounding_carry(VecU32<16> top, VecU32<16> low) {
  const auto t = reinterpret_cast<__m128i>(top);
  const __m128i x =
      _mm_subs_epu16(reinterpret_cast<__m128i>(low), _mm_andnot_si128(t, _mm_set1_epi16(1)));
  return reinterpret_cast<VecU32<16>>(_mm_sub_epi16(t, _mm_cmpgt_epi16(_mm_setzero_si128(), x)));
}
__attribute__((target("arch=x86-64-v3"))) inline VecU32<32> add_rounding_carry(VecU32<32> top,
                                                                               VecU32<32> low) {
  const auto t = reinterpret_cast<__m256i>(top);
  const __m256i x = _mm256_subs_epu16(reinterpret_cast<__m256i>(low),
                                      _mm256_andnot_si256(t, _mm256_set1_epi16(1)));
  return reinterpret_cast<VecU32<32>>(
      _mm256_sub_epi16(t, _mm256_cmpgt_epi16(_mm256_setzero_si256(), x)));
}
#pragma GCC diagnostic push
// GCC 12's AVX-512 headers start _mm512_set1_epi16 from _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// AVX-512 builds both word vectors with one two-source word permute each (where AVX2 takes a
// shift and a blend), and the carry with a ternary-logic op and an unsigned word compare into a
// mask: where low >= 0x8000 + (1 if top is even). 5 operations per register pair instead of 8,
// and fewer of them on the two pipes Zen 4 shifts on: the avx512 variant's W = 2 sum 6-14% faster.
__attribute__((target("arch=x86-64-v4"))) inline VecU32<64> pack_sum_pairs_avx512(VecU32<64> even,
                                                                                  VecU32<64> odd) {
  const auto e = reinterpret_cast<__m512i>(even);
  const auto o = reinterpret_cast<__m512i>(odd);
  // Word 2k from e's word 2k + 1 (tops) or 2k (lows), word 2k + 1 from o's; o's words are 32-63.
  const __m512i tops =
      _mm512_set_epi16(63, 31, 61, 29, 59, 27, 57, 25, 55, 23, 53, 21, 51, 19, 49, 17, 47, 15, 45,
                       13, 43, 11, 41, 9, 39, 7, 37, 5, 35, 3, 33, 1);
  const __m512i lows =
      _mm512_set_epi16(62, 30, 60, 28, 58, 26, 56, 24, 54, 22, 52, 20, 50, 18, 48, 16, 46, 14, 44,
                       12, 42, 10, 40, 8, 38, 6, 36, 4, 34, 2, 32, 0);
  const __m512i top = _mm512_permutex2var_epi16(e, tops, o);
  const __m512i low = _mm512_permutex2var_epi16(e, lows, o);
  const __m512i one = _mm512_set1_epi16(1);
  // (~top & 1) | 0x8000: ternary-logic table 0xae over (top, one, 0x8000).
  const __m512i threshold =
      _mm512_ternarylogic_epi32(top, one, _mm512_set1_epi16(static_cast<short>(0x8000)), 0xae);
  const __mmask32 carry = _mm512_cmp_epu16_mask(low, threshold, _MM_CMPINT_NLT);
  return reinterpret_cast<VecU32<64>>(_mm512_mask_add_epi16(top, carry, top, one));
}
#pragma GCC diagnostic pop
#else
// (These kernels, like the ISA clones and __builtin_shuffle above, are GCC's on x86-64.)
#error "the CPU reduction kernels need GCC on x86-64 (reduce_kernels.hpp)"
#endif

// The pairs' bf16 results of a sum or an average of two or more ranks, packed. Every NaN such a
// result can hold has its low 16 bits zero (widened from bf16, or x86's default NaN) and is
// already quiet (an addition or a division quiets), so rounding to nearest even leaves its top
// half as float_to_bf16 would and round_to_bf16's NaN select is not needed. The rounding works on
// both results of a lane at once: 8 operations per register pair (AVX2; 5 on AVX-512) instead
// of 10.
template <int B>
TPCOMM_INLINE VecU32<B> pack_sum_pairs(VecF<B> even, VecF<B> odd) {
  VecU32<B> e;
  VecU32<B> o;
  std::memcpy(&e, &even, sizeof(e));
  std::memcpy(&o, &odd, sizeof(o));
  if constexpr (B == 64) {
    return pack_sum_pairs_avx512(e, o);
  } else {
    return add_rounding_carry(pack_tops<B>(e, o), pack_lows<B>(e, o));
  }
}

// The bf16 pairs loop of reduce_body: returns where it stopped. SumRounding: the caller checked
// pack_sum_pairs' condition (a sum or an average of two or more ranks). Ranks: the rank count
// when the caller knows it at compile time (0 otherwise; sums of 2 and 4 ranks, the usual TP
// sizes): the rank loop and its bookkeeping disappear, which bound the loop once the rounding is
// cheap (bf16 W = 4, 256 KiB per rank: avx2 27 -> 46 GB/s, avx512bf16 34 -> 56, float32's speed).
template <int Op, bool Avg, int B, bool SumRounding, int Ranks>
TPCOMM_INLINE std::size_t reduce_bf16_pairs(const void* const* srcs, int ranks, std::size_t n,
                                            void* out, float w) {
  constexpr std::size_t es = 2;
  constexpr std::size_t step = B / 2;  // elements of one register of pairs
  if constexpr (Ranks != 0) ranks = Ranks;
  auto at = [](const void* p, std::size_t i) { return static_cast<const char*>(p) + i * es; };
  // One register of pairs at i: loads, reduction, rounding, store.
  auto one = [&](std::size_t i) TPCOMM_INLINE_LAMBDA {
    VecU32<B> pairs = load_u32<B>(at(srcs[0], i));
    VecF<B> even = bf16_even<B>(pairs);
    VecF<B> odd = bf16_odd<B>(pairs);
    for (int r = 1; r < ranks; ++r) {
      pairs = load_u32<B>(at(srcs[r], i));
      even = apply<Op>(even, bf16_even<B>(pairs));
      odd = apply<Op>(odd, bf16_odd<B>(pairs));
    }
    if constexpr (Avg) {
      even = even / w;
      odd = odd / w;
    }
    const VecU32<B> packed = SumRounding ? pack_sum_pairs<B>(even, odd)
                                         : round_to_bf16<B>(even) | (round_to_bf16<B>(odd) << 16);
    std::memcpy(static_cast<char*>(out) + i * es, &packed, sizeof(packed));
  };
  constexpr std::size_t kLine = step * kRegistersPerLine<es, step>;  // elements
  std::size_t i = 0;
  for (; i + kLine <= n; i += kLine) {
    prefetch_line_ahead<es>(srcs, ranks, i, n);
    for (std::size_t u = 0; u < kLine; u += step) one(i + u);
  }
  for (; i + step <= n; i += step) one(i);
  return i;
}

}  // namespace tpcomm::kernels::cpu::variants
