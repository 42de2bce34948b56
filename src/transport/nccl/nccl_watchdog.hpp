// NCCL's waits are the GPU's: a call whose peer never comes keeps its kernel, and the user's
// stream, waiting forever. The watchdog is a thread per NCCL communicator that polls
// ncclCommGetAsyncError and the completion of every eager call, and calls ncclCommAbort — which
// ends NCCL's kernels, so the user's stream wait returns — when NCCL reports an error, when a call
// has not completed within the deadline, or when the communicator is aborted. The failure it saw
// becomes the communicator's error at the next call (take_failure()). Its polls and its aborts go
// through the communicator's call gate (nccl_call_gate.hpp): an abort waits for the user's call
// inside NCCL to leave, and nothing polls a communicator once it is aborted. Graph-captured calls
// are not watched: their replays are launched by the user, unseen (docs/gpu.md, "Graph-captured
// NCCL calls are not bounded").
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nccl_call_gate.hpp"
#include "nccl_library.hpp"
#include "transport/common/call_identity.hpp"

namespace tpcomm::transport {

class NcclWatchdog {
 public:
  NcclWatchdog(const NcclLibrary& lib, ncclComm_t comm, NcclCallGate& gate, int device,
               std::chrono::milliseconds timeout);
  ~NcclWatchdog();  // stops the thread; the communicator (and the gate) stay their owner's
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // After an eager call was enqueued on `stream`: its completion is awaited within the deadline.
  void watch(cudaStream_t stream, const CallIdentity& call);
  // From any thread: NCCL's kernels are ended now, or when the call inside NCCL leaves (gate).
  void abort(const std::string& why);
  // The failure seen (once), or nullopt.
  std::optional<std::string> take_failure();
  // Teardown (docs/gpu.md, "Teardown is bounded"): waits up to `budget` for every watched call to
  // complete. False when one is still pending then, or the communicator was aborted meanwhile.
  bool wait_for_pending(std::chrono::milliseconds budget);

 private:
  struct Pending {
    cudaEvent_t done;
    std::chrono::steady_clock::time_point deadline;
    CallIdentity call;  // worded only if it times out
  };
  void run();
  void poll_async_error();
  void retire_completed();
  void abort_locked(const std::string& why);

  const NcclLibrary& lib_;
  ncclComm_t comm_;
  NcclCallGate& gate_;
  int device_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;  // pending_ became empty, or the gate was asked to abort
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_;  // completed events, reused
  std::optional<std::string> failure_;
  bool reported_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tpcomm::transport
