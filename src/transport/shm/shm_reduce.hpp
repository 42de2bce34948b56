// Reduction kernels of the shm backend: element-wise over the ranks' slots in rank order, fp32
// accumulation, fp16/bf16 rounded to nearest even once at the end. Compiled for AVX-512, AVX2
// and the x86-64 baseline; the best this CPU runs is chosen once at run time. Every variant and
// every rank runs the same per-element order, so results are bitwise identical everywhere
// (ranks on different CPUs included). Integer types take int_reduce.hpp's one loop in every
// variant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tpcomm/types.hpp"

namespace tpcomm::transport::shm {

// kAvx512: x86-64-v4; kAvx512Bf16: that and AVX512-BF16 (only bf16 differs: native rounding).
enum class KernelIsa { kBaseline, kAvx2, kAvx512, kAvx512Bf16 };

// out[i] = op over r of srcs[r][i], for i in [0, count). `srcs` has `ranks` pointers. out may
// alias one of the sources. Runs the best variant for this CPU.
void reduce_slots(const void* const* srcs, int ranks, std::size_t count, DataType type, ReduceOp op,
                  void* out);
// The same through one named variant; the caller checks cpu_runs(isa) first.
void reduce_slots_with(KernelIsa isa, const void* const* srcs, int ranks, std::size_t count,
                       DataType type, ReduceOp op, void* out);

// Best first.
inline constexpr KernelIsa kAllKernelIsas[] = {KernelIsa::kAvx512Bf16, KernelIsa::kAvx512,
                                               KernelIsa::kAvx2, KernelIsa::kBaseline};
bool cpu_runs(KernelIsa isa);
KernelIsa best_kernel_isa();
const char* to_string(KernelIsa isa);
// The variant reduce_slots runs on this CPU ("avx512bf16", "avx512", "avx2" or "baseline").
const char* kernel_isa();

}  // namespace tpcomm::transport::shm
