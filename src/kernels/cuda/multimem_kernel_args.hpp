// The arguments of one multimem kernel launch (one step of one call), shared by the host backend
// and the kernels. Plain data, like custom_kernel_args.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_layout.hpp"
#include "kernels/cuda/kernel_codes.hpp"
#include "multimem_layout.hpp"

namespace tpcomm::kernels::cuda {

struct MultimemArgs {
  KernelOp op = KernelOp::kOneShot;  // kOneShot: all-reduce; kAllGather; kReduceScatter
  MultimemMode mode = MultimemMode::kReduceSum;
  int type = kernel_code::kFloat32;  // tpcomm::DataType
  int reduce = kernel_code::kSum;    // tpcomm::ReduceOp
  int rank = 0;
  int world = 2;
  int blocks = 1;
  std::size_t count = 0;      // elements of this step (per rank for all-gather / reduce-scatter)
  char* unicast = nullptr;    // this rank's workspace
  char* multicast = nullptr;  // the same offsets on every rank at once
  MultimemLayout layout;
  const void* input = nullptr;
  void* output = nullptr;
  std::size_t in_rank_stride = 0;   // reduce-scatter: bytes between rank blocks of the input
  std::size_t out_rank_stride = 0;  // all-gather: bytes between rank blocks of the output
  std::uint64_t wait_budget_ns = 0;
  const volatile std::int32_t* abort_word = nullptr;
  KernelFailure* failure = nullptr;
  int in_graph = 0;  // captured into a CUDA graph: a failed launch traps (end_failed_launch)
};

// Launches one step on `stream` (a cudaStream_t); returns the cudaError_t of the launch. On a
// device below sm_90 the kernel traps (the plan never admits multimem there).
int launch_multimem_kernel(const MultimemArgs& args, void* stream);

// Sets the group's failure word on every rank (`multicast_word`: its multicast address) from
// one thread on `stream`: how a rank that aborts tells the peers' kernels.
int launch_multimem_publish_failure(void* multicast_word, std::uint64_t value, void* stream);

// The set-up self-test: one thread reads the sum of every rank's four floats at `multicast_in`
// (multimem.ld_reduce) and writes it to `result`.
int launch_multimem_probe(const void* multicast_in, void* result, void* stream);

}  // namespace tpcomm::kernels::cuda
