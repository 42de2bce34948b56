// NCCL calls made of other NCCL calls and a kernel of tpcomm's: all_reduce_rmsnorm unfused (NCCL's
// fp32 all-reduce, then the add+norm kernel) and deterministic mode's reductions (the raw inputs
// gathered through NCCL, then summed in rank order). Each stage goes through the backend's own run
// (`run`), so it is gated and watched like any call, and names the user's call as its outer one.
#pragma once

#include <cstddef>
#include <functional>

#include "transport/common/backend.hpp"

namespace tpcomm::transport {

// Device memory a composed call keeps between calls, grown to the largest call outside graph
// capture (cudaMalloc cannot be captured: a captured call that needs more than an eager one made
// before is refused, naming the size). On the communicator's device, which must be current.
class DeviceScratch {
 public:
  explicit DeviceScratch(const char* what) : what_(what) {}
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch() { release(); }

  void* at_least(std::size_t bytes, const Call& c);
  void release() noexcept;

 private:
  const char* what_;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

using RunStage = std::function<void(const Call&)>;

// all_reduce_rmsnorm: the input as fp32 in `sums`, their all-reduce in place there (its `ordered`
// passed on), then the add+norm kernel: one rounding, as the fused kernels.
void run_unfused_rmsnorm(const Call& c, DeviceScratch& sums, const RunStage& run);

// A floating reduction (all_reduce, reduce_scatter(v), reduce) of rank `rank` of `size` summed in
// rank order 0..W-1: all_reduce and reduce_scatterv gather every rank's input, reduce_scatter
// exchanges the blocks (all-to-all), reduce gathers at the root; then the rank-order kernel
// (kernels/cuda/ordered_kernel_args.hpp) reduces them into the output.
void run_rank_ordered(const Call& c, int rank, int size, DeviceScratch& gathered,
                      const RunStage& run);

}  // namespace tpcomm::transport
