// The reduction kernels, compiled three times from one source: AVX-512 (x86-64-v4: F, BW, DQ,
// VL, CD), AVX2 (x86-64-v3: AVX2, F16C, FMA) and the x86-64 baseline. The best this CPU runs serves
// every call (shm_kernel_choice.cpp); each variant can also be called by name (tests, benchmarks).
#include "shm_reduce.hpp"

#include "shm_reduce_kernels.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "transport/common/convert.hpp"

namespace tpcomm::transport::shm {

namespace {

using kernels::apply;

constexpr std::size_t kBlock = 1024;  // fp16 elements widened to fp32 at a time

// One pass over the sources, one register of elements at a time (GCC vector extensions of B
// bytes: 64 for the AVX-512 clone, 32 for AVX2, 16 for the baseline's SSE2), so a W = 2 float32
// sum reads each source once and writes the output once. Each clone gets the width of its own
// registers: GCC lowers a vector wider than the target's registers through the stack, which made
// the AVX2 clone with 64-byte vectors slower than the baseline (9 against 25 GB/s, float32 W = 2).
// The helpers below pass vectors by value (see shm_reduce_kernels.hpp).
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
constexpr std::size_t kVec = 16;  // fp32 lanes of an AVX-512 register

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

// bf16 pairs, two elements per 32-bit lane: a lane holds an even element in its low half and the
// next odd one in its high half. Both widen to fp32 in place (a shift, a mask) and pack back with
// a shift and an or, so bf16 needs no lane shuffles at all (with the AVX-512 clone built for
// x86-64-v4, about 2x faster than widening a register of elements with a conversion).
template <int B>
TPCOMM_INLINE VecU32<B> load_u32(const void* p) {
  VecU32<B> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <int B>
TPCOMM_INLINE VecF<B> bf16_even(VecU32<B> pairs) {
  return bits_to_f32<B>(pairs << 16);
}
template <int B>
TPCOMM_INLINE VecF<B> bf16_odd(VecU32<B> pairs) {
  return bits_to_f32<B>(pairs & 0xffff0000u);
}

// The pairs' bf16 results of a sum or an average of two or more ranks, packed. Every NaN such a
// result can hold has its low 16 bits zero (widened from bf16, or x86's default NaN) and is
// already quiet (an addition or a division quiets), so the round-to-nearest-even addition leaves
// its top half as float_to_bf16 would and the NaN select of round_to_bf16 is not needed: 10
// integer operations per register pair instead of about 20. The word interleave becomes one
// vpblendw (AVX2) or masked move (AVX-512); SSE2 has no word blend, so a mask and an or there.
template <int B, std::size_t... K>
constexpr VecWords<B> odd_words_from_second(std::index_sequence<K...>) {
  return VecWords<B>{static_cast<std::uint16_t>(K % 2 == 0 ? K : B / 2 + K)...};
}
template <int B>
TPCOMM_INLINE VecU32<B> pack_sum_pairs(VecF<B> even, VecF<B> odd) {
  VecU32<B> e;
  VecU32<B> o;
  std::memcpy(&e, &even, sizeof(e));
  std::memcpy(&o, &odd, sizeof(o));
  e = (e + 0x7fffu + ((e >> 16) & 1u)) >> 16;
  o = o + 0x7fffu + ((o >> 16) & 1u);
  if constexpr (B == 16) {
    return e | (o & 0xffff0000u);
  } else {
    VecWords<B> ew;
    VecWords<B> ow;
    std::memcpy(&ew, &e, sizeof(ew));
    std::memcpy(&ow, &o, sizeof(ow));
    constexpr VecWords<B> kMask = odd_words_from_second<B>(std::make_index_sequence<B / 2>());
    const VecWords<B> packed = __builtin_shuffle(ew, ow, kMask);
    VecU32<B> result;
    std::memcpy(&result, &packed, sizeof(result));
    return result;
  }
}

template <bool Bf16, int B>
TPCOMM_INLINE VecF<B> load_elements(const void* p) {
  if constexpr (Bf16) {
    return load_bf16<B>(p);
  } else {
    return load_f32<B>(p);
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
  auto one = [&](std::size_t i) {
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
  // A cache line of each source per iteration (two registers on AVX2, four on the baseline),
  // each line prefetched once: per register, a prefetch per rank, its test and the loop's own
  // bookkeeping cost as much as a quarter of the rounding.
  constexpr std::size_t per_line = B >= 64 ? 1 : 64 / B;
  std::size_t i = 0;
  for (; i + step * per_line <= n; i += step * per_line) {
    // Peers' lanes sit in other cores' caches, hundreds of ns per line away, and this loop
    // spends enough instructions per line that too few loads are in flight to cover that:
    // prefetching 2 KiB ahead made bf16 W = 2 all-reduces 25-35% faster at 8-64 KiB. (The
    // float32 loop keeps enough loads in flight by itself; there it did not help.)
    constexpr std::size_t kAhead = 2048 / es;
    if (i + kAhead < n) {
      for (int r = 0; r < ranks; ++r) __builtin_prefetch(at(srcs[r], i + kAhead));
    }
    for (std::size_t u = 0; u < per_line; ++u) one(i + u * step);
  }
  for (; i + step <= n; i += step) one(i);
  return i;
}

// Element-wise reduction in rank order; the vector body and the scalar tail do the same
// operations in the same order, so every element's result is independent of its position and of
// the register width B.
template <int Op, bool Avg, bool Bf16, int B, bool SumRounding = false, int Ranks = 0>
TPCOMM_INLINE void reduce_body(const void* const* srcs, int ranks, std::size_t n, void* out,
                               float w) {
  constexpr std::size_t es = Bf16 ? 2 : 4;
  constexpr std::size_t lanes = B / 4;
  auto at = [](const void* p, std::size_t i) { return static_cast<const char*>(p) + i * es; };
  if constexpr (Ranks != 0) ranks = Ranks;
  std::size_t i = 0;
  if constexpr (Bf16) i = reduce_bf16_pairs<Op, Avg, B, SumRounding, Ranks>(srcs, ranks, n, out, w);
  for (; i + lanes <= n; i += lanes) {
    VecF<B> acc = load_elements<Bf16, B>(at(srcs[0], i));
    for (int r = 1; r < ranks; ++r) acc = apply<Op>(acc, load_elements<Bf16, B>(at(srcs[r], i)));
    if constexpr (Avg) acc = acc / w;
    if constexpr (Bf16) {
      store_bf16<B>(static_cast<char*>(out) + i * es, acc);
    } else {
      std::memcpy(static_cast<char*>(out) + i * es, &acc, sizeof(acc));
    }
  }
  for (; i < n; ++i) {
    auto value = [&](int r) {
      return Bf16 ? bf16_to_float(static_cast<const std::uint16_t*>(srcs[r])[i])
                  : static_cast<const float*>(srcs[r])[i];
    };
    float acc = value(0);
    for (int r = 1; r < ranks; ++r) acc = apply<Op>(acc, value(r));
    if constexpr (Avg) acc = acc / w;
    if constexpr (Bf16) {
      static_cast<std::uint16_t*>(out)[i] = float_to_bf16(acc);
    } else {
      static_cast<float*>(out)[i] = acc;
    }
  }
}

template <bool Bf16, int B>
TPCOMM_INLINE void reduce_dispatch(const void* const* srcs, int ranks, std::size_t n, void* out,
                                   int code, bool avg) {
  const auto w = static_cast<float>(ranks);
  // bf16 sums and averages of two or more ranks round with pack_sum_pairs (SumRounding = Bf16).
  const bool sum_rounding = Bf16 && ranks >= 2;
  if (avg && sum_rounding) return reduce_body<0, true, Bf16, B, Bf16>(srcs, ranks, n, out, w);
  if (avg) return reduce_body<0, true, Bf16, B>(srcs, ranks, n, out, w);
  if (code == 1) return reduce_body<1, false, Bf16, B>(srcs, ranks, n, out, w);
  if (code == 2) return reduce_body<2, false, Bf16, B>(srcs, ranks, n, out, w);
  if (ranks == 2) return reduce_body<0, false, Bf16, B, Bf16, 2>(srcs, ranks, n, out, w);
  if (ranks == 4) return reduce_body<0, false, Bf16, B, Bf16, 4>(srcs, ranks, n, out, w);
  if (sum_rounding) return reduce_body<0, false, Bf16, B, Bf16>(srcs, ranks, n, out, w);
  reduce_body<0, false, Bf16, B>(srcs, ranks, n, out, w);
}

TPCOMM_INLINE void combine_body(float* acc, const float* x, std::size_t n, int op) {
  switch (op) {
    case 1:
      for (std::size_t i = 0; i < n; ++i) acc[i] = acc[i] < x[i] ? x[i] : acc[i];
      return;
    case 2:
      for (std::size_t i = 0; i < n; ++i) acc[i] = x[i] < acc[i] ? x[i] : acc[i];
      return;
    default:
      for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
  }
}

TPCOMM_INLINE void scale_body(float* acc, std::size_t n, float w) {
  for (std::size_t i = 0; i < n; ++i) acc[i] /= w;
}

// One variant's entry points: the same inlined bodies, compiled for its target.
struct Kernels {
  void (*f32)(const void* const*, int, std::size_t, void*, int, bool);
  void (*bf16)(const void* const*, int, std::size_t, void*, int, bool);
  void (*combine)(float*, const float*, std::size_t, int);
  void (*scale)(float*, std::size_t, float);
};

#define TPCOMM_KERNEL_VARIANT(SUFFIX, TARGET, BYTES)                                             \
  TARGET void reduce_f32_##SUFFIX(const void* const* srcs, int ranks, std::size_t n, void* out,  \
                                  int code, bool avg) {                                          \
    reduce_dispatch<false, BYTES>(srcs, ranks, n, out, code, avg);                               \
  }                                                                                              \
  TARGET void reduce_bf16_##SUFFIX(const void* const* srcs, int ranks, std::size_t n, void* out, \
                                   int code, bool avg) {                                         \
    reduce_dispatch<true, BYTES>(srcs, ranks, n, out, code, avg);                                \
  }                                                                                              \
  TARGET void combine_##SUFFIX(float* acc, const float* x, std::size_t n, int op) {              \
    combine_body(acc, x, n, op);                                                                 \
  }                                                                                              \
  TARGET void scale_##SUFFIX(float* acc, std::size_t n, float w) {                               \
    scale_body(acc, n, w);                                                                       \
  }                                                                                              \
  constexpr Kernels kKernels_##SUFFIX = {reduce_f32_##SUFFIX, reduce_bf16_##SUFFIX,              \
                                         combine_##SUFFIX, scale_##SUFFIX};

TPCOMM_KERNEL_VARIANT(avx512, TPCOMM_TARGET_AVX512, 64)
TPCOMM_KERNEL_VARIANT(avx2, TPCOMM_TARGET_AVX2, 32)
TPCOMM_KERNEL_VARIANT(baseline, , 16)

int op_code(ReduceOp op) {
  return op == ReduceOp::kMax ? 1 : op == ReduceOp::kMin ? 2 : 0;
}

#if defined(TPCOMM_HAVE_BF16_NATIVE)
// The AVX-512 kernels with bf16 rounded by the AVX512-BF16 instruction.
constexpr Kernels kKernels_avx512bf16 = {reduce_f32_avx512, kernels::reduce_bf16_avx512bf16,
                                         combine_avx512, scale_avx512};
#else
constexpr Kernels kKernels_avx512bf16 = kKernels_avx512;
#endif

const Kernels& kernels_of(KernelIsa isa) {
  return isa == KernelIsa::kAvx512Bf16 ? kKernels_avx512bf16
         : isa == KernelIsa::kAvx512   ? kKernels_avx512
         : isa == KernelIsa::kAvx2     ? kKernels_avx2
                                       : kKernels_baseline;
}

// fp16: on AVX-512 and AVX2 converted in registers; the baseline widens a block at a time (with
// F16C where present, convert.cpp), then the same order of operations.
void reduce_f16(KernelIsa isa, const void* const* srcs, int ranks, std::size_t count, void* out,
                int code, bool avg) {
#if defined(TPCOMM_HAVE_F16_IN_REGISTERS)
  if (isa == KernelIsa::kAvx512 || isa == KernelIsa::kAvx512Bf16)
    return kernels::reduce_f16_avx512(srcs, ranks, count, out, code, avg);
  if (isa == KernelIsa::kAvx2) return kernels::reduce_f16_avx2(srcs, ranks, count, out, code, avg);
#endif
  const Kernels& k = kernels_of(isa);
  float acc[kBlock];
  float x[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = std::min(kBlock, count - base);
    auto widen = [&](const void* src, float* dst) {
      to_float(static_cast<const std::uint16_t*>(src) + base, DataType::kFloat16, n, dst);
    };
    widen(srcs[0], acc);
    for (int r = 1; r < ranks; ++r) {
      widen(srcs[r], x);
      k.combine(acc, x, n, code);
    }
    if (avg) k.scale(acc, n, static_cast<float>(ranks));
    from_float(acc, DataType::kFloat16, n, static_cast<std::uint16_t*>(out) + base);
  }
}

}  // namespace

void reduce_slots_with(KernelIsa isa, const void* const* srcs, int ranks, std::size_t count,
                       DataType type, ReduceOp op, void* out) {
  const int code = op_code(op);
  const bool avg = op == ReduceOp::kAvg;
  if (type == DataType::kFloat32) return kernels_of(isa).f32(srcs, ranks, count, out, code, avg);
  if (type == DataType::kBFloat16) return kernels_of(isa).bf16(srcs, ranks, count, out, code, avg);
  reduce_f16(isa, srcs, ranks, count, out, code, avg);
}

void reduce_slots(const void* const* srcs, int ranks, std::size_t count, DataType type, ReduceOp op,
                  void* out) {
  reduce_slots_with(best_kernel_isa(), srcs, ranks, count, type, op, out);
}

}  // namespace tpcomm::transport::shm
