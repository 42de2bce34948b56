// CallGate (call_gate.hpp).
#include "call_gate.hpp"

#include <fmt/format.h>

#include "common/foreign_error.hpp"
#include "common/fork_generation.hpp"
#include "common/log_format.hpp"

namespace tpcomm::runtime {

CallGate::CallGate(GroupAbort& group_abort, int rank)
    : group_abort_(group_abort), rank_(rank), fork_generation_(common::process_fork_generation()) {}

bool CallGate::in_forked_child() const {
  return common::process_fork_generation() != fork_generation_;
}

void CallGate::refuse_in_forked_child(std::string_view what) const {
  if (!in_forked_child()) return;
  throw invalid_input(fmt::format(
      "rank {}: {}: this communicator was created before a fork(), and this process is the "
      "fork() child: its sockets, threads and shared memory belong to the parent's group, which "
      "the child must not use (create a new communicator in the child, or fork before creating "
      "one)",
      rank_, what));
}

void CallGate::refuse_if_closed(std::string_view what) const {
  if (closed()) {
    throw invalid_input(fmt::format("rank {}: {}: this communicator was closed", rank_, what));
  }
}

CallGate::InFlight::InFlight(CallGate& gate, std::string_view what) : gate_(gate) {
  gate_.refuse_if_closed(what);
  gate_.refuse_in_forked_child(what);
  std::lock_guard<std::mutex> lock(gate_.mutex_);
  gate_.refuse_if_closed(what);  // close() may have begun since
  ++gate_.in_flight_;
}

CallGate::InFlight::~InFlight() {
  std::lock_guard<std::mutex> lock(gate_.mutex_);
  if (--gate_.in_flight_ == 0) gate_.idle_.notify_all();
}

void CallGate::close(const std::function<void()>& tear_down) {
  if (in_forked_child()) {
    closed_.store(true, std::memory_order_release);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed()) {
    idle_.wait(lock, [&] { return torn_down_; });
    return;
  }
  closed_.store(true, std::memory_order_release);
  if (in_flight_ > 0) {
    // Not under the mutex: the abort talks to the store, and the calls take the mutex to end.
    lock.unlock();
    group_abort_.abort_with(
        Error(ErrorCode::kAborted, fmt::format("rank {}: close() was called while a call was in "
                                               "flight (from another thread)",
                                               rank_)));
    lock.lock();
  }
  idle_.wait(lock, [&] { return in_flight_ == 0; });
  lock.unlock();
  tear_down();
  lock.lock();
  torn_down_ = true;
  idle_.notify_all();  // a second close() waiting for the first
}

Error CallGate::foreign_failure(std::string_view what, const std::exception& e) {
  Error full = common::as_error(fmt::format("rank {}: {}", rank_, what), e);
  TPCOMM_LOG(kError, "comm", "{}", full.what());
  group_abort_.abort_with(full);
  return full;
}

}  // namespace tpcomm::runtime
