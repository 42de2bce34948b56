// Which reduction variants this CPU runs, and their names (reduce.hpp).
#include "reduce.hpp"
#include "reduce_kernels.hpp"

namespace tpcomm::kernels::cpu {

bool cpu_runs(KernelIsa isa) {
#if defined(TPCOMM_X86_VARIANTS)
  __builtin_cpu_init();
  if (isa == KernelIsa::kAvx512Bf16)
    return __builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512bf16");
  if (isa == KernelIsa::kAvx512) return __builtin_cpu_supports("x86-64-v4");
  if (isa == KernelIsa::kAvx2) return __builtin_cpu_supports("x86-64-v3");
  return true;
#else
  return isa == KernelIsa::kBaseline;
#endif
}

KernelIsa fastest_kernel_isa() {
  for (KernelIsa isa : kAllKernelIsas) {
    if (cpu_runs(isa)) return isa;
  }
  return KernelIsa::kBaseline;
}

const char* to_string(KernelIsa isa) {
  return isa == KernelIsa::kAvx512Bf16 ? "avx512bf16"
         : isa == KernelIsa::kAvx512   ? "avx512"
         : isa == KernelIsa::kAvx2     ? "avx2"
                                       : "baseline";
}

}  // namespace tpcomm::kernels::cpu
