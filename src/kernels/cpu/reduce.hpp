// The CPU reduction kernels (shm, hier and gloo run them): element-wise over the ranks' slots in
// rank order, fp32 accumulation, fp16/bf16 rounded to nearest even once at the end. Compiled for
// AVX-512, AVX2 and the x86-64 baseline; which one a process runs is chosen once by the transport
// (transport/cpu/kernel_choice.hpp), since the choice reads the environment. Every variant and
// every rank runs the same per-element order, so results are bitwise identical everywhere
// (ranks on different CPUs included). Integer types take int_reduce.hpp's one loop in every
// variant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tpcomm/types.hpp"

namespace tpcomm::kernels::cpu {

// kAvx512: x86-64-v4; kAvx512Bf16: that and AVX512-BF16 (only bf16 differs: native rounding).
enum class KernelIsa { kBaseline, kAvx2, kAvx512, kAvx512Bf16 };

// out[i] = op over r of srcs[r][i], for i in [0, count), through the variant `isa`. `srcs` has
// `ranks` pointers. out may alias one of the sources. The caller checks cpu_runs(isa) first.
void reduce_slots_with(KernelIsa isa, const void* const* srcs, int ranks, std::size_t count,
                       DataType type, ReduceOp op, void* out);

// Best first.
inline constexpr KernelIsa kAllKernelIsas[] = {KernelIsa::kAvx512Bf16, KernelIsa::kAvx512,
                                               KernelIsa::kAvx2, KernelIsa::kBaseline};
bool cpu_runs(KernelIsa isa);
// The best variant this CPU runs.
KernelIsa fastest_kernel_isa();
// "avx512bf16", "avx512", "avx2" or "baseline".
const char* to_string(KernelIsa isa);

}  // namespace tpcomm::kernels::cpu
