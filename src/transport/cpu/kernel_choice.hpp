// The CPU reduction variant this process runs (kernels/cpu/reduce.hpp): the fastest this CPU
// runs, or the one TPCOMM_CPU_KERNELS names. Chosen here, not in the kernels, because the choice
// reads the environment, which the kernels layer does not.
#pragma once

#include <cstddef>

#include "kernels/cpu/reduce.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::transport::cpu {

using kernels::cpu::KernelIsa;

// Chosen once per process; a TPCOMM_CPU_KERNELS this CPU cannot run throws kUnavailable.
KernelIsa chosen_kernel_isa();
// Its name ("avx512bf16", "avx512", "avx2" or "baseline").
const char* kernel_isa();

// kernels::cpu::reduce_slots_with through the chosen variant.
void reduce_slots(const void* const* srcs, int ranks, std::size_t count, DataType type, ReduceOp op,
                  void* out);

}  // namespace tpcomm::transport::cpu
