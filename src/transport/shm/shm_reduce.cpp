// The reduction kernels, multiversioned for AVX-512 / AVX2 / baseline.
#include "shm_reduce.hpp"

#include <algorithm>
#include <cstring>

#include "../common/convert.hpp"

namespace tpcomm::transport::shm {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TPCOMM_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TPCOMM_MULTIVERSION
#endif

constexpr std::size_t kBlock = 1024;  // elements widened to fp32 at a time

TPCOMM_MULTIVERSION
void combine(float* acc, const float* x, std::size_t n, int op) {
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

TPCOMM_MULTIVERSION
void scale(float* acc, std::size_t n, float factor_inverse) {
  for (std::size_t i = 0; i < n; ++i) acc[i] /= factor_inverse;
}

TPCOMM_MULTIVERSION
void widen_bf16(const std::uint16_t* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits = static_cast<std::uint32_t>(src[i]) << 16;
    std::memcpy(&dst[i], &bits, sizeof(float));
  }
}

int op_code(ReduceOp op) {
  return op == ReduceOp::kMax ? 1 : op == ReduceOp::kMin ? 2 : 0;
}

int dispatched_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 2;
  if (__builtin_cpu_supports("avx2")) return 1;
#endif
  return 0;
}

}  // namespace

const char* kernel_isa() {
  static const int isa = dispatched_isa();
  return isa == 2 ? "avx512f" : isa == 1 ? "avx2" : "baseline";
}

void reduce_slots(const void* const* srcs, int ranks, std::size_t count, DataType type, ReduceOp op,
                  void* out) {
  const int code = op_code(op);
  const float w = static_cast<float>(ranks);
  if (type == DataType::kFloat32) {
    // Accumulate straight into a private block first: `out` may alias a source still needed.
    float acc[kBlock];
    for (std::size_t base = 0; base < count; base += kBlock) {
      const std::size_t n = std::min(kBlock, count - base);
      std::memcpy(acc, static_cast<const float*>(srcs[0]) + base, n * sizeof(float));
      for (int r = 1; r < ranks; ++r)
        combine(acc, static_cast<const float*>(srcs[r]) + base, n, code);
      if (op == ReduceOp::kAvg) scale(acc, n, w);
      std::memcpy(static_cast<float*>(out) + base, acc, n * sizeof(float));
    }
    return;
  }
  float acc[kBlock];
  float x[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = std::min(kBlock, count - base);
    auto widen = [&](const void* src, float* dst) {
      const auto* s = static_cast<const std::uint16_t*>(src) + base;
      if (type == DataType::kBFloat16) {
        widen_bf16(s, dst, n);
      } else {
        to_float(s, type, n, dst);
      }
    };
    widen(srcs[0], acc);
    for (int r = 1; r < ranks; ++r) {
      widen(srcs[r], x);
      combine(acc, x, n, code);
    }
    if (op == ReduceOp::kAvg) scale(acc, n, w);
    auto* o = static_cast<std::uint16_t*>(out) + base;
    from_float(acc, type, n, o);
  }
}

}  // namespace tpcomm::transport::shm
