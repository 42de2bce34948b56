// sum_two_f32_by_pages_with, compiled for AVX-512, AVX2 and the baseline as reduce.cpp is.
#include "sum_by_pages.hpp"

#include <cstring>

#include "reduce_kernels.hpp"
#include "reduce_vectors.hpp"

namespace tpcomm::kernels::cpu {
namespace {

using namespace variants;  // NOLINT(google-build-using-namespace): the kernels' own helpers

constexpr std::size_t kPage = 4096 / sizeof(float);  // elements
constexpr std::size_t kPages = 8;  // 4 pages: 12.1 us in the measurement above; 16: slower

// Whole groups of kPages pages; returns the elements done.
template <int B>
TPCOMM_INLINE std::size_t sum_groups(const void* const* srcs, std::size_t n, void* out) {
  constexpr std::size_t lanes = B / sizeof(float);
  const auto* a = static_cast<const char*>(srcs[0]);
  const auto* b = static_cast<const char*>(srcs[1]);
  auto* o = static_cast<char*>(out);
  std::size_t group = 0;
  for (; group + kPages * kPage <= n; group += kPages * kPage) {
    for (std::size_t at = 0; at < kPage; at += lanes) {
      for (std::size_t page = 0; page < kPages; ++page) {
        const std::size_t byte = (group + page * kPage + at) * sizeof(float);
        const VecF<B> sum = load_elements<false, B>(a + byte) + load_elements<false, B>(b + byte);
        std::memcpy(o + byte, &sum, sizeof(sum));
      }
    }
  }
  return group;
}

#define TPCOMM_SUM_BY_PAGES_VARIANT(SUFFIX, TARGET, BYTES)                                    \
  TARGET std::size_t sum_groups_##SUFFIX(const void* const* srcs, std::size_t n, void* out) { \
    return sum_groups<BYTES>(srcs, n, out);                                                   \
  }

TPCOMM_SUM_BY_PAGES_VARIANT(avx512, TPCOMM_TARGET_AVX512, 64)
TPCOMM_SUM_BY_PAGES_VARIANT(avx2, TPCOMM_TARGET_AVX2, 32)
TPCOMM_SUM_BY_PAGES_VARIANT(baseline, , 16)

}  // namespace

void sum_two_f32_by_pages_with(KernelIsa isa, const void* const* srcs, std::size_t count,
                               void* out) {
  const std::size_t done = isa == KernelIsa::kAvx512 || isa == KernelIsa::kAvx512Bf16
                               ? sum_groups_avx512(srcs, count, out)
                           : isa == KernelIsa::kAvx2 ? sum_groups_avx2(srcs, count, out)
                                                     : sum_groups_baseline(srcs, count, out);
  if (done == count) return;
  const void* rest[2] = {static_cast<const char*>(srcs[0]) + done * sizeof(float),
                         static_cast<const char*>(srcs[1]) + done * sizeof(float)};
  reduce_slots_with(isa, rest, 2, count - done, DataType::kFloat32, ReduceOp::kSum,
                    static_cast<char*>(out) + done * sizeof(float));
}

}  // namespace tpcomm::kernels::cpu
