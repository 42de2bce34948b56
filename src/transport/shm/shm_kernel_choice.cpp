// Which reduction variant serves the calls: the best this CPU runs, or the one
// TPCOMM_CPU_KERNELS names (shm_reduce.hpp).
#include <string>

#include <fmt/format.h>

#include "shm_reduce.hpp"
#include "shm_reduce_kernels.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::shm {

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

namespace {

// TPCOMM_CPU_KERNELS: another variant than the best, to measure what a machine without the best
// one would run (an AVX2 machine's path on an AVX-512 one); one this CPU cannot run is refused.
KernelIsa chosen_kernel_isa() {
  const KernelIsa best = cpu_runs(KernelIsa::kAvx512Bf16) ? KernelIsa::kAvx512Bf16
                         : cpu_runs(KernelIsa::kAvx512)   ? KernelIsa::kAvx512
                         : cpu_runs(KernelIsa::kAvx2)     ? KernelIsa::kAvx2
                                                          : KernelIsa::kBaseline;
  const std::string wanted = env_string("TPCOMM_CPU_KERNELS");
  for (KernelIsa isa : kAllKernelIsas) {
    if (wanted != to_string(isa)) continue;
    if (!cpu_runs(isa)) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("TPCOMM_CPU_KERNELS={}: this CPU cannot run that variant (it runs "
                              "{})",
                              wanted, to_string(best)));
    }
    return isa;
  }
  return best;
}

}  // namespace

KernelIsa best_kernel_isa() {
  static const KernelIsa isa = chosen_kernel_isa();
  return isa;
}

const char* to_string(KernelIsa isa) {
  return isa == KernelIsa::kAvx512Bf16 ? "avx512bf16"
         : isa == KernelIsa::kAvx512   ? "avx512"
         : isa == KernelIsa::kAvx2     ? "avx2"
                                       : "baseline";
}

const char* kernel_isa() {
  return to_string(best_kernel_isa());
}

}  // namespace tpcomm::transport::shm
