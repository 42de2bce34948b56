// What the host and every kernel family (custom, multimem) agree on as plain integers: element
// type and reduction codes, the operation a launch performs, and the failure record a kernel
// that gave up leaves for the watchdog. No CUDA types, no host headers.
#pragma once

#include <cstdint>

namespace tpcomm::transport::cuda {

// The integer codes kernels compare for tpcomm::DataType and tpcomm::ReduceOp (the kernels see
// no host header); custom_backend.cpp ties each to its enum with a static_assert.
namespace kernel_code {
inline constexpr int kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2;
inline constexpr int kSum = 0, kMax = 1, kMin = 2, kAvg = 3;
}  // namespace kernel_code

enum class KernelOp : int { kOneShot = 0, kTwoShot = 1, kAllGather = 2, kReduceScatter = 3 };

// What a kernel that gave up writes into host-mapped memory for the watchdog. The first thread
// to give up takes `claimed`, writes the fields, fences, and publishes `code` last: the host reads
// the fields only once it sees a code, so it never reads them half-written.
struct KernelFailure {
  std::int32_t code;     // 0 none, 1 a peer did not signal within the time budget, 2 aborted
  std::int32_t rank;     // this rank
  std::int32_t peer;     // the rank that did not signal
  std::int32_t phase;    // 0 start, 1 middle
  std::uint64_t step;    // the step number that was awaited
  std::int32_t claimed;  // taken by the thread that records the failure
  std::int32_t unused;
};

}  // namespace tpcomm::transport::cuda
