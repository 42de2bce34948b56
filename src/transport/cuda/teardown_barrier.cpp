#include "teardown_barrier.hpp"

#include <exception>

#include "common/log_format.hpp"
#include "tpcomm/deadline.hpp"

namespace tpcomm::transport::cuda {

bool meet_before_teardown(Bootstrap& bootstrap, bool aborted, std::chrono::milliseconds limit,
                          const char* what) {
  if (aborted) return false;
  try {
    bootstrap.barrier(what, Deadline::after(limit));
    return true;
  } catch (const std::exception& e) {
    TPCOMM_LOG(kWarn, "multimem",
               "rank {}: {}: the ranks did not meet before the teardown ({}); "
               "going on",
               bootstrap.rank(), what, e.what());
    return false;
  }
}

bool tear_down_multicast(const MulticastTeardown& steps) noexcept {
  steps.drain();
  const bool met = steps.meet();
  steps.release();
  return met;
}

}  // namespace tpcomm::transport::cuda
