// The arguments of one custom kernel launch (one chunk of one call), shared by the host backend
// and the kernels. Plain data: no CUDA types, so host code that never includes a CUDA header can
// fill it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_layout.hpp"
#include "kernels/cuda/kernel_codes.hpp"

namespace tpcomm::kernels::cuda {

struct KernelArgs {
  KernelOp op = KernelOp::kOneShot;
  int type = kernel_code::kFloat32;  // tpcomm::DataType
  int reduce = kernel_code::kSum;    // tpcomm::ReduceOp
  int rank = 0;
  int world = 2;
  int blocks = 1;
  std::size_t count = 0;  // elements of this chunk (per rank for all-gather / reduce-scatter)
  // Every rank's workspace as mapped in this process (peers[rank] is this rank's own).
  void* peers[kMaxRanks] = {};
  std::size_t data_offset = 0;      // where the data area starts in each workspace
  std::size_t half_bytes = 0;       // each of the two data buffers (used by step parity)
  const void* input = nullptr;      // this chunk's input
  void* output = nullptr;           // this chunk's output
  std::size_t in_rank_stride = 0;   // reduce-scatter: bytes between rank blocks of the input
  std::size_t out_rank_stride = 0;  // all-gather: bytes between rank blocks of the output
  // A captured all-reduce's graph buffer slot (graph_buffers.hpp), or null: when its flag is set
  // at run time, every rank's input is read in place at slot[1 + r] + slot_offset.
  const std::uint64_t* graph_slot = nullptr;
  // The operation a replay runs while the slot's flag is 0 (inputs copied): the graph table's
  // row assumes registered inputs, the eager table's row knows what copying costs
  // (docs/gpu-graphs.md, "Copying replays take the eager table's algorithm"). The same on every
  // rank, as the flag is (register_graph_buffers drains and votes).
  KernelOp unregistered_op = KernelOp::kOneShot;
  std::size_t slot_offset = 0;       // bytes of this chunk into the inputs
  std::uint64_t wait_budget_ns = 0;  // how long a wait may spin before giving up (%globaltimer)
  const volatile std::int32_t* abort_word = nullptr;  // host-mapped: nonzero = stop waiting
  KernelFailure* failure = nullptr;                   // host-mapped: first failure
  int in_graph = 0;  // captured into a CUDA graph: a failed launch traps (end_failed_launch)
  // all_reduce_rmsnorm (kOneShotRmsNorm, kTwoShotRmsNorm): this chunk's rows of `hidden` elements
  // (count is whole rows), its residual (or null) and residual_out (or null: the rounded sum is
  // kept in output only), the weight, eps.
  const void* residual = nullptr;
  void* residual_out = nullptr;
  const void* weight = nullptr;
  std::size_t hidden = 0;
  float eps = 0.0f;
};

// Launches one chunk on `stream` (a cudaStream_t). Returns the cudaError_t of the launch.
int launch_custom_kernel(const KernelArgs& args, void* stream);

}  // namespace tpcomm::kernels::cuda
