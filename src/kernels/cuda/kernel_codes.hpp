// What the host and every kernel family (custom, multimem) agree on as plain integers: element
// type and reduction codes, the operation a launch performs, and the failure record a kernel
// that gave up leaves for the watchdog. No CUDA types, no host headers.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_layout.hpp"  // TPCOMM_HD: host and device

namespace tpcomm::kernels::cuda {

// The integer codes kernels compare for tpcomm::DataType and tpcomm::ReduceOp (the kernels see
// no host header); custom_backend.cpp ties each to its enum with a static_assert.
namespace kernel_code {
inline constexpr int kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2;
inline constexpr int kSum = 0, kMax = 1, kMin = 2, kAvg = 3;
}  // namespace kernel_code

// kOneShotRmsNorm and kTwoShotRmsNorm: all_reduce_rmsnorm (KernelArgs' norm fields), by rows.
enum class KernelOp : int {
  kOneShot = 0,
  kTwoShot = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kOneShotRmsNorm = 4,
  kTwoShotRmsNorm = 5
};

// What a kernel that gave up writes into host-mapped memory for the watchdog. The first thread
// to give up takes `claimed`, writes the fields, fences, and publishes `code` last: the host reads
// the fields only once it sees a code, so it never reads them half-written.
struct KernelFailure {
  // 0 none, 1 a peer did not signal within the time budget, 2 aborted on this rank, 3 the group
  // failed earlier (the group's failure word was set: by a kernel on rank `peer` that gave up,
  // or by rank `peer` aborting)
  std::int32_t code;
  std::int32_t rank;     // this rank
  std::int32_t peer;     // the rank that did not signal, or (code 3) the rank that failed
  std::int32_t phase;    // 0 start, 1 middle
  std::uint64_t step;    // the step number that was awaited
  std::int32_t claimed;  // taken by the thread that records the failure
  std::int32_t unused;
};

// The group's failure word: one 64-bit word in every rank's workspace, 0 while the group is
// healthy. A kernel that gives up (code 1 or 2 above) writes it on every rank, and so does a rank
// that aborts (from the host); every kernel reads its own copy on entry and while it waits, and
// then stops before it copies in or signals. It is never cleared: after one failure every later
// launch on every rank fails too, a CUDA graph replay included (which then traps, so that the
// failure reaches the program through the CUDA context instead of a silent wrong result).
// The value names the first cause: (origin rank + 1) << 8 | cause (1 timeout, 2 abort).
TPCOMM_HD constexpr std::uint64_t group_failure_value(int cause, int origin_rank) {
  return (static_cast<std::uint64_t>(origin_rank + 1) << 8) | static_cast<std::uint64_t>(cause);
}
TPCOMM_HD constexpr int group_failure_origin(std::uint64_t value) {
  return static_cast<int>(value >> 8) - 1;
}
TPCOMM_HD constexpr int group_failure_cause(std::uint64_t value) {
  return static_cast<int>(value & 0xff);
}

}  // namespace tpcomm::kernels::cuda
