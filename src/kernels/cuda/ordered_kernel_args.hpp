// Deterministic mode's reduction of gathered inputs (ordered_kernels.cu): a backend whose own
// reductions do not keep rank order (NCCL) gathers every rank's raw input into one buffer, block
// r at r x stride, and this kernel reduces them element by element in rank order 0..W-1, with
// fp32 accumulation and one rounding: the custom kernels' order and bits (kernel_common.cuh's
// reduce_range), so a call gives the same bits whichever of the two its size selects.
#pragma once

#include <cstddef>

#include "kernels/cuda/kernel_codes.hpp"

namespace tpcomm::kernels::cuda {

struct RankOrderArgs {
  const void* blocks = nullptr;  // world blocks of `type`, block r at blocks + r * stride_bytes
  std::size_t stride_bytes = 0;
  int world = 0;
  std::size_t count = 0;  // elements reduced from each block
  int type = kernel_code::kFloat32;
  int reduce = kernel_code::kSum;
  void* out = nullptr;  // count elements of `type`; may not overlap the blocks
};

// On `stream` (a cudaStream_t). Returns the cudaError_t of the launch (cudaErrorInvalidValue for
// an unknown type or reduction).
int launch_rank_order_reduce(const RankOrderArgs& args, void* stream);

}  // namespace tpcomm::kernels::cuda
