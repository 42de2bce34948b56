// The NCCL communicator's call gate (nccl_call_gate.hpp; docs/gpu.md, "One thread in the
// communicator at a time").
#include "nccl_call_gate.hpp"

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {

NcclCallGate::NcclCallGate(Action abort_action) : abort_action_(std::move(abort_action)) {}

void NcclCallGate::enter(const char* what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_ && !requested_.load(std::memory_order_relaxed)) {
    throw Error(ErrorCode::kAborted,
                fmt::format("{} was refused: the NCCL communicator was already destroyed", what));
  }
  if (requested_.load(std::memory_order_relaxed)) {
    throw Error(ErrorCode::kAborted,
                fmt::format("{} was refused: the NCCL communicator was aborted ({})", what, why_));
  }
  ++inside_;
}

bool NcclCallGate::try_enter() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_ || requested_.load(std::memory_order_relaxed)) return false;
  ++inside_;
  return true;
}

void NcclCallGate::leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  --inside_;
  if (inside_ == 0 && requested_.load(std::memory_order_relaxed)) perform_locked();
}

void NcclCallGate::request_abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_ || requested_.load(std::memory_order_relaxed)) return;
  why_ = why;
  // Set before the wait loops of the calls inside can look, and before any enter can pass.
  requested_.store(true, std::memory_order_release);
  if (inside_ == 0) perform_locked();
}

std::string NcclCallGate::abort_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return why_;
}

bool NcclCallGate::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return performed_;
}

void NcclCallGate::close(const Action& destroy) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  closed_ = true;
  // No call is inside (the precondition), so a requested abort has already run.
  if (!performed_) destroy();
}

// Under mutex_, with no call inside: the only place the abort action runs.
void NcclCallGate::perform_locked() {
  if (performed_) return;
  performed_ = true;
  closed_ = true;
  try {
    abort_action_();
  } catch (...) {
    // The action must not throw; a call's leave (a destructor) cannot let it escape.
  }
}

}  // namespace tpcomm::transport
