// The reduction kernels, compiled three times from one source: AVX-512 (x86-64-v4: F, BW, DQ,
// VL, CD), AVX2 (x86-64-v3: AVX2, F16C, FMA) and the x86-64 baseline. The best this CPU runs serves
// every call (transport/cpu/kernel_choice.cpp); each variant can also be called by name (tests,
// benchmarks).
#include "reduce.hpp"

#include "reduce_bf16_pairs.hpp"
#include "reduce_kernels.hpp"
#include "reduce_vectors.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/int_reduce.hpp"

namespace tpcomm::kernels::cpu {

namespace {

// One pass over the sources, one register of elements at a time (reduce_vectors.hpp), so a
// W = 2 float32 sum reads each source once and writes the output once. Each clone gets the width
// of its own registers: GCC lowers a vector wider than the target's registers through the stack,
// which made the AVX2 clone with 64-byte vectors slower than the baseline (9 against 25 GB/s,
// float32 W = 2). The helpers pass vectors by value (see reduce_kernels.hpp).
using namespace variants;  // NOLINT(google-build-using-namespace): the kernels' own helpers

constexpr std::size_t kBlock = 1024;  // fp16 elements widened to fp32 at a time

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
constexpr Kernels kKernels_avx512bf16 = {reduce_f32_avx512, variants::reduce_bf16_avx512bf16,
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
    return variants::reduce_f16_avx512(srcs, ranks, count, out, code, avg);
  if (isa == KernelIsa::kAvx2) return variants::reduce_f16_avx2(srcs, ranks, count, out, code, avg);
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
  if (!is_floating(type)) return reduce_ints(srcs, ranks, count, type, op, out);  // any variant
  const int code = op_code(op);
  const bool avg = op == ReduceOp::kAvg;
  if (type == DataType::kFloat32) return kernels_of(isa).f32(srcs, ranks, count, out, code, avg);
  if (type == DataType::kBFloat16) return kernels_of(isa).bf16(srcs, ranks, count, out, code, avg);
  reduce_f16(isa, srcs, ranks, count, out, code, avg);
}

}  // namespace tpcomm::kernels::cpu
