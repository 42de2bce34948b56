// Communicator::allocate and free: registered host buffers (transport/shm/shm_registered_heap.hpp,
// docs/registered.md). Both are collective; an argument or space problem fails on every rank
// and leaves the communicator usable, a missing or dead peer aborts it as a failed call does.
#include <fmt/format.h>

#include "common/log_format.hpp"
#include "communicator_state.hpp"

namespace tpcomm {
namespace {

using runtime::CommunicatorState;

template <typename Body>
auto registered_body(CommunicatorState& c, const std::string& what, Body& body) {
  c.group_abort.throw_if_aborted();
  if (c.plan.device_type == DeviceType::kCuda) {
    throw invalid_input(
        fmt::format("rank {}: {}: registered buffers are host memory, for a CPU "
                    "communicator (this one is kCuda)",
                    c.bootstrap->rank(), what));
  }
  try {
    return body();
  } catch (const Error& e) {
    const bool fatal = e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kAborted;
    Error full(e.code(),
               fmt::format("rank {}: {} failed: {}{}", c.bootstrap->rank(), what, e.what(),
                           fatal ? c.group_abort.peer_report(true) : std::string()));
    if (fatal) {
      TPCOMM_LOG(kError, "comm", "{}", full.what());
      c.group_abort.abort_with(full);
    }
    throw full;
  }
}

template <typename Body>
auto registered_call(CommunicatorState& c, const std::string& what, Body body) {
  return c.gate.run(what, [&] { return registered_body(c, what, body); });
}

}  // namespace

void* Communicator::allocate(std::size_t bytes) {
  CommunicatorState& c = *impl_;
  return registered_call(c, fmt::format("allocate({} bytes)", bytes),
                         [&] { return c.heap->allocate(bytes, *c.bootstrap, c.deadline()); });
}

void Communicator::free(void* buffer) {
  CommunicatorState& c = *impl_;
  registered_call(c, fmt::format("free({})", buffer),
                  [&] { c.heap->free(buffer, *c.bootstrap, c.deadline()); });
}

std::shared_ptr<void> Communicator::keep_mapped(void* buffer) {
  // Not collective, so not queued behind the calls; refused in a fork() child as they are.
  impl_->gate.refuse_in_forked_child("keep_mapped");
  impl_->gate.refuse_if_closed("keep_mapped");
  return impl_->heap->keep_mapped(buffer);
}

}  // namespace tpcomm
