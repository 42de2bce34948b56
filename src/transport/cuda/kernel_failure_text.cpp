#include "kernel_failure_text.hpp"

#include <fmt/format.h>

namespace tpcomm::transport::cuda {

std::string kernel_failure_text(const KernelFailure& f, const std::string& what,
                                std::chrono::milliseconds budget) {
  if (f.code == 2) {
    return fmt::format("{} on rank {} stopped at step {}: the group was aborted", what, f.rank,
                       f.step);
  }
  if (f.code == 3) {
    const std::string origin =
        f.peer >= 0 ? fmt::format("rank {}", f.peer) : std::string("another rank");
    return fmt::format(
        "{} on rank {} stopped at step {}: the group failed earlier ({} gave up or aborted; "
        "every later launch on every rank fails, CUDA graph replays by trapping)",
        what, f.rank, f.step, origin);
  }
  static const char* phases[] = {"start", "middle", "end"};
  const char* phase = f.phase >= 0 && f.phase < 3 ? phases[f.phase] : "?";
  return f.peer >= 0 ? fmt::format(
                           "{} on rank {}: rank {} did not signal step {} ({} barrier) "
                           "within {} ms (the kernels' wait budget, TPCOMM_KERNEL_TIMEOUT_MS)",
                           what, f.rank, f.peer, f.step, phase, budget.count())
                     : fmt::format(
                           "{} on rank {}: not every rank signalled step {} ({} barrier) "
                           "within {} ms (the kernels' wait budget, TPCOMM_KERNEL_TIMEOUT_MS)",
                           what, f.rank, f.step, phase, budget.count());
}

std::chrono::milliseconds kernel_wait_budget(std::chrono::milliseconds timeout,
                                             std::chrono::milliseconds kernel_timeout) {
  return kernel_timeout.count() > 0 ? kernel_timeout : timeout;
}

}  // namespace tpcomm::transport::cuda
