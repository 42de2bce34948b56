// The fp16 reduction kernels that convert in registers, for the AVX2 and AVX-512 clones
// (reduce_kernels.hpp).
#include <immintrin.h>

#include <cstdint>

#include "reduce_kernels.hpp"

namespace tpcomm::kernels::cpu::variants {

#if defined(TPCOMM_HAVE_F16_IN_REGISTERS)
constexpr std::size_t kVec = 16;  // fp32 lanes of an AVX-512 register

namespace {

// fp16 on AVX-512 and AVX2: converted in registers with the F16C instructions (x86-64-v4 and
// x86-64-v3 both include them), where GCC 12 would convert vectors of _Float16 one element at a
// time. One template serves both widths: `Wide` is the fp32 register, `load` and `store` convert
// one register's worth. The region's target applies to everything defined in it, lambdas
// included; apply() is inlined from outside. The tail uses the scalar F16C conversions, the same
// rounding, so results do not depend on position. 2.5x or more faster than widening blocks
// through memory.
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#pragma GCC diagnostic push
// GCC 12's own AVX-512 headers start conversions from _mm512_undefined_*, which it then reports
// as maybe uninitialised (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Ranks: the rank count when known at compile time (sums of 2 or 4): the rank loop's bookkeeping,
// per 8 or 16 elements, cost more than the conversions (AVX2 kernel 34 -> 46 GB/s at W = 2).
template <int Op, bool Avg, typename Wide, std::size_t Lanes, int Ranks, typename Load,
          typename Store>
TPCOMM_INLINE void reduce_f16_registers(const void* const* srcs, int ranks, std::size_t n,
                                        void* out, float w, Load load, Store store) {
  if constexpr (Ranks != 0) ranks = Ranks;
  auto src = [&](int r) { return static_cast<const std::uint16_t*>(srcs[r]); };
  auto* o = static_cast<std::uint16_t*>(out);
  auto one = [&](std::size_t i) TPCOMM_INLINE_LAMBDA {
    Wide acc = load(src(0) + i);
    for (int r = 1; r < ranks; ++r) acc = apply<Op>(acc, load(src(r) + i));
    if constexpr (Avg) acc = acc / w;
    store(o + i, acc);
  };
  constexpr std::size_t kLine = Lanes * kRegistersPerLine<2, Lanes>;  // elements
  std::size_t i = 0;
  for (; i + kLine <= n; i += kLine) {
    prefetch_line_ahead<2>(srcs, ranks, i, n);
    for (std::size_t u = 0; u < kLine; u += Lanes) one(i + u);
  }
  for (; i + Lanes <= n; i += Lanes) one(i);
  for (; i < n; ++i) {
    float acc = _cvtsh_ss(src(0)[i]);
    for (int r = 1; r < ranks; ++r) acc = apply<Op>(acc, _cvtsh_ss(src(r)[i]));
    if constexpr (Avg) acc = acc / w;
    o[i] = _cvtss_sh(acc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
}

template <int Op, bool Avg, int Ranks>
void reduce_f16_avx2(const void* const* srcs, int ranks, std::size_t n, void* out, float w) {
  reduce_f16_registers<Op, Avg, __m256, 8, Ranks>(
      srcs, ranks, n, out, w,
      [](const std::uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      },
      [](std::uint16_t* p, __m256 v) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                         _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      });
}
#pragma GCC diagnostic pop
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <int Op, bool Avg, int Ranks>
void reduce_f16_avx512(const void* const* srcs, int ranks, std::size_t n, void* out, float w) {
  reduce_f16_registers<Op, Avg, __m512, kVec, Ranks>(
      srcs, ranks, n, out, w,
      [](const std::uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      },
      [](std::uint16_t* p, __m512 v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                            _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      });
}
#pragma GCC diagnostic pop
#pragma GCC pop_options

#define TPCOMM_F16_ENTRY(NAME, TARGET)                                                     \
  TARGET void NAME(const void* const* srcs, int ranks, std::size_t n, void* out, int code, \
                   bool avg) {                                                             \
    const auto w = static_cast<float>(ranks);                                              \
    if (avg) return NAME<0, true, 0>(srcs, ranks, n, out, w);                              \
    if (code == 1) return NAME<1, false, 0>(srcs, ranks, n, out, w);                       \
    if (code == 2) return NAME<2, false, 0>(srcs, ranks, n, out, w);                       \
    if (ranks == 2) return NAME<0, false, 2>(srcs, ranks, n, out, w);                      \
    if (ranks == 4) return NAME<0, false, 4>(srcs, ranks, n, out, w);                      \
    NAME<0, false, 0>(srcs, ranks, n, out, w);                                             \
  }
}  // namespace

TPCOMM_F16_ENTRY(reduce_f16_avx2, TPCOMM_TARGET_AVX2)
TPCOMM_F16_ENTRY(reduce_f16_avx512, TPCOMM_TARGET_AVX512)
#undef TPCOMM_F16_ENTRY
#endif

}  // namespace tpcomm::kernels::cpu::variants
