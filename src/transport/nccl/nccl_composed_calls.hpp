// NCCL calls made of other NCCL calls and a kernel of tpcomm's: all_reduce_rmsnorm unfused (NCCL's
// fp32 all-reduce, then the add+norm kernel) and deterministic mode's reductions (the raw inputs
// gathered through NCCL, then summed in rank order). Each stage goes through the backend's own run
// (`run`), so it is gated and watched like any call, and names the user's call as its outer one.
// Their device scratch is a GraphSafeScratch: a buffer a captured call used outlives its growth,
// and a captured call that would need it to grow is refused with what to do.
#pragma once

#include <functional>

#include "transport/common/backend.hpp"
#include "transport/common/graph_safe_scratch.hpp"

namespace tpcomm::transport {

using RunStage = std::function<void(const Call&)>;

// all_reduce_rmsnorm: the input as fp32 in `sums`, their all-reduce in place there (its `ordered`
// passed on), then the add+norm kernel: one rounding, as the fused kernels.
void run_unfused_rmsnorm(const Call& c, GraphSafeScratch& sums, const RunStage& run);

// A floating reduction (all_reduce, reduce_scatter(v), reduce) of rank `rank` of `size` summed in
// rank order 0..W-1: every rank's input gathered (common/ordered_gather.hpp), then the rank-order
// kernel (kernels/cuda/ordered_kernel_args.hpp) reduces the blocks into the output.
void run_rank_ordered(const Call& c, int rank, int size, GraphSafeScratch& gathered,
                      const RunStage& run);

}  // namespace tpcomm::transport
