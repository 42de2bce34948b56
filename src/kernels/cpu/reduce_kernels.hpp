// What the CPU reduction kernels' sources share (reduce.cpp, reduce_f16.cpp,
// reduce_bf16.cpp): the targets of the ISA clones, the element-wise operations, and the
// kernels that convert in registers (fp16; bf16 with AVX512-BF16).
#pragma once

#include <cstddef>

namespace tpcomm::kernels::cpu::variants {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TPCOMM_X86_VARIANTS 1
#define TPCOMM_HAVE_F16_IN_REGISTERS 1
#define TPCOMM_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#define TPCOMM_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#define TPCOMM_HAVE_BF16_NATIVE 1
#define TPCOMM_TARGET_AVX512BF16 __attribute__((target("arch=x86-64-v4,avx512bf16")))
#else
#define TPCOMM_TARGET_AVX512
#define TPCOMM_TARGET_AVX2
#define TPCOMM_TARGET_AVX512BF16
#endif

#define TPCOMM_INLINE inline __attribute__((always_inline))
// A lambda inlined into its caller before anything else: a call to a helper with its own target
// attribute inside it then sits in the ISA clone, where GCC can inline it (see add_rounding_carry).
#define TPCOMM_INLINE_LAMBDA __attribute__((always_inline))

// The kernels' helpers take and return vectors by value; they are always inlined into one clone,
// so the ABI note GCC gives for such signatures does not apply (for the files that include this
// header, which are the kernels' own).
#pragma GCC diagnostic ignored "-Wpsabi"

// One element-wise step of a reduction: 0 sum, 1 max, 2 min (avg is a sum, divided at the end).
template <int Op, typename T>
TPCOMM_INLINE T apply(T acc, T x) {
  if constexpr (Op == 1) {
    return acc < x ? x : acc;
  } else if constexpr (Op == 2) {
    return x < acc ? x : acc;
  } else {
    return acc + x;
  }
}

// The loop shape of the kernels that convert (bf16 and fp16; the float32 loop is plain): a cache
// line of each source per iteration (kRegistersPerLine registers of `Step` elements), each
// source's line 2 KiB ahead prefetched once per iteration by prefetch_line_ahead. Why: peers'
// lanes sit in other cores' caches, hundreds of ns per line away, and these loops spend enough
// instructions per line that too few loads are in flight to cover that (prefetching made bf16
// W = 2 all-reduces 25-35% faster at 8-64 KiB, fp16 20-27% at 16-256 KiB; the float32 loop keeps
// enough loads in flight by itself). Once per line, not per register: there a prefetch per rank,
// its test and the loop's own bookkeeping cost as much as a quarter of the bf16 rounding. (Each
// kernel writes the loop itself: a helper taking the register's body as a lambda cannot inline a
// lambda defined under a target pragma, as the fp16 and AVX512-BF16 ones are.)
template <std::size_t ElementBytes, std::size_t Step>
constexpr std::size_t kRegistersPerLine = 64 / ElementBytes > Step ? 64 / ElementBytes / Step : 1;

template <std::size_t ElementBytes>
TPCOMM_INLINE void prefetch_line_ahead(const void* const* srcs, int ranks, std::size_t i,
                                       std::size_t n) {
  constexpr std::size_t kAhead = 2048 / ElementBytes;  // elements
  if (i + kAhead >= n) return;
  for (int r = 0; r < ranks; ++r) {
    __builtin_prefetch(static_cast<const char*>(srcs[r]) + (i + kAhead) * ElementBytes);
  }
}

#if defined(TPCOMM_HAVE_F16_IN_REGISTERS)
// out = op over the ranks of fp16 `srcs`, accumulated in fp32 and rounded once
// (reduce_f16.cpp); `code` as apply's Op, `avg` divides the sum by `ranks`.
void reduce_f16_avx2(const void* const* srcs, int ranks, std::size_t n, void* out, int code,
                     bool avg);
void reduce_f16_avx512(const void* const* srcs, int ranks, std::size_t n, void* out, int code,
                       bool avg);
#endif
#if defined(TPCOMM_HAVE_BF16_NATIVE)
// bf16 with the rounding done by vcvtne2ps2bf16 (reduce_bf16.cpp).
void reduce_bf16_avx512bf16(const void* const* srcs, int ranks, std::size_t n, void* out, int code,
                            bool avg);
#endif

}  // namespace tpcomm::kernels::cpu::variants
