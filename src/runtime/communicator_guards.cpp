// The communicator's protections against misuse from outside a call's own arguments: a fork()
// child holding an inherited communicator, and failures that are not tpcomm::Error
// (guarded_call.hpp).
#include <fmt/format.h>

#include "common/foreign_error.hpp"
#include "common/fork_generation.hpp"
#include "common/log_format.hpp"
#include "communicator_impl.hpp"

namespace tpcomm {

bool CommunicatorState::in_forked_child() const {
  return detail::process_fork_generation() != fork_generation;
}

void CommunicatorState::refuse_in_forked_child(std::string_view what) const {
  if (!in_forked_child()) return;
  throw invalid_input(fmt::format(
      "rank {}: {}: this communicator was created before a fork(), and this process is the "
      "fork() child: its sockets, threads and shared memory belong to the parent's group, which "
      "the child must not use (create a new communicator in the child, or fork before creating "
      "one)",
      bootstrap->rank(), what));
}

Error CommunicatorState::foreign_failure(std::string_view what, const std::exception& e) {
  Error full = detail::as_error(fmt::format("rank {}: {}", bootstrap->rank(), what), e);
  TPCOMM_LOG(kError, "comm", "{}", full.what());
  abort_with(full);
  return full;
}

namespace detail {

// Keeps what a fork() child must not destroy: its destructors would deregister the parent's
// sockets from an epoll set the two processes share, join threads the child does not have,
// unlink the group's segments and talk on the parent's store connection. Reachable from here, it
// is not reported as a leak either.
void abandon_in_forked_child(std::unique_ptr<CommunicatorState> state) {
  static auto* abandoned = new std::vector<std::unique_ptr<CommunicatorState>>();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  abandoned->push_back(std::move(state));
}

}  // namespace detail
}  // namespace tpcomm
