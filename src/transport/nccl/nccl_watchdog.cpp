// The NCCL communicator's watchdog thread (nccl_watchdog.hpp).
#include "nccl_watchdog.hpp"

#include <fmt/format.h>

namespace tpcomm::transport {
namespace {

constexpr auto kPollEvery = std::chrono::milliseconds(10);

}  // namespace

NcclWatchdog::NcclWatchdog(const NcclLibrary& lib, ncclComm_t comm, NcclCallGate& gate, int device,
                           std::chrono::milliseconds timeout)
    : lib_(lib), comm_(comm), gate_(gate), device_(device), timeout_(timeout) {
  thread_ = std::thread([this] { run(); });
}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (auto& p : pending_) cudaEventDestroy(p.done);
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

// On the call path: an event from the pool (created only when every one is in use), recorded.
void NcclWatchdog::watch(cudaStream_t stream, const CallIdentity& call) {
  cudaEvent_t done = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      done = free_.back();
      free_.pop_back();
    }
  }
  if (done == nullptr && cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) {
    cudaGetLastError();
    return;  // unwatched: NCCL's own errors still reach the async-error poll
  }
  if (cudaEventRecord(done, stream) != cudaSuccess) {
    cudaGetLastError();
    cudaEventDestroy(done);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back({done, std::chrono::steady_clock::now() + timeout_, call});
}

void NcclWatchdog::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  abort_locked(why);
}

// NCCL allows ncclCommAbort from another thread — that is its use — but not while the user's
// thread is inside an NCCL call on the communicator: the gate defers it to that call's leave.
void NcclWatchdog::abort_locked(const std::string& why) {
  if (!failure_) failure_ = why;
  gate_.request_abort(why);
  drained_.notify_all();
}

std::optional<std::string> NcclWatchdog::take_failure() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_ || reported_) return std::nullopt;
  reported_ = true;
  return failure_;
}

bool NcclWatchdog::wait_for_pending(std::chrono::milliseconds budget) {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait_for(lock, budget, [&] { return pending_.empty() || gate_.abort_requested(); });
  return pending_.empty() && !gate_.abort_requested();
}

void NcclWatchdog::run() {
  cudaSetDevice(device_);  // event queries of this device from this thread
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, kPollEvery, [&] { return stopping_; });
    if (stopping_) continue;
    if (!gate_.abort_requested()) poll_async_error();
    if (!gate_.abort_requested()) retire_completed();
    if (pending_.empty() || gate_.abort_requested()) drained_.notify_all();
  }
}

// Under mutex_. The poll is a call on the communicator like any other: inside the gate, so that
// an abort requested meanwhile waits for it instead of freeing the communicator under it.
void NcclWatchdog::poll_async_error() {
  if (!gate_.try_enter()) return;  // aborted, or closed
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = lib_.comm_get_async_error(comm_, &state);
  gate_.leave();
  if (r == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
    abort_locked(fmt::format("NCCL reported {} ({})", static_cast<int>(state),
                             lib_.get_error_string(state)));
  }
}

// Under mutex_: completed calls leave pending_ (their events back to the pool); the oldest one
// past its deadline aborts the communicator.
void NcclWatchdog::retire_completed() {
  const auto now = std::chrono::steady_clock::now();
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    const cudaError_t q = cudaEventQuery(p.done);
    if (q == cudaErrorNotReady) {
      if (now < p.deadline) return;
      abort_locked(
          fmt::format("{} did not complete within {} ms (a rank missing or stuck); "
                      "ncclCommAbort ended NCCL's kernels",
                      describe(p.call), timeout_.count()));
      return;
    }
    if (q != cudaSuccess) cudaGetLastError();
    free_.push_back(p.done);  // back to the pool for a later call
    pending_.pop_front();
  }
}

}  // namespace tpcomm::transport
