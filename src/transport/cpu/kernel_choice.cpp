// The reduction variant this process runs (kernel_choice.hpp).
#include "kernel_choice.hpp"

#include <string>

#include <fmt/format.h>

#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::cpu {

namespace {

// TPCOMM_CPU_KERNELS: another variant than the fastest, to measure what a machine without the
// fastest would run (an AVX2 machine's path on an AVX-512 one); one this CPU cannot run is refused.
KernelIsa kernel_isa_of_environment() {
  const KernelIsa fastest = kernels::cpu::fastest_kernel_isa();
  const std::string wanted = env_string("TPCOMM_CPU_KERNELS");
  for (KernelIsa isa : kernels::cpu::kAllKernelIsas) {
    if (wanted != kernels::cpu::to_string(isa)) continue;
    if (!kernels::cpu::cpu_runs(isa)) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("TPCOMM_CPU_KERNELS={}: this CPU cannot run that variant (it runs "
                              "{})",
                              wanted, kernels::cpu::to_string(fastest)));
    }
    return isa;
  }
  return fastest;
}

}  // namespace

KernelIsa chosen_kernel_isa() {
  static const KernelIsa isa = kernel_isa_of_environment();
  return isa;
}

const char* kernel_isa() {
  return kernels::cpu::to_string(chosen_kernel_isa());
}

void reduce_slots(const void* const* srcs, int ranks, std::size_t count, DataType type, ReduceOp op,
                  void* out) {
  kernels::cpu::reduce_slots_with(chosen_kernel_isa(), srcs, ranks, count, type, op, out);
}

}  // namespace tpcomm::transport::cpu
