// all_reduce_rmsnorm's kernels outside the custom kernel (norm_kernels.cu): the conversion of an
// input to fp32 and the add+norm epilogue over rows that are already summed, for a backend that
// all-reduces first (NCCL) and for the GPU check's unfused timing. Plain data, as
// custom_kernel_args.hpp.
#pragma once

#include <cstddef>

#include "kernels/cuda/kernel_codes.hpp"

namespace tpcomm::kernels::cuda {

struct NormArgs {
  const void* sums = nullptr;        // rows x hidden, summed over the ranks
  bool sums_f32 = true;              // of fp32 (NCCL's fp32 all-reduce), else of `type`
  int type = kernel_code::kFloat32;  // tpcomm::DataType of everything else
  std::size_t rows = 0, hidden = 0;
  const void* residual = nullptr;  // or null
  void* residual_out = nullptr;    // or null: the rounded sum stays in out only
  const void* weight = nullptr;
  void* out = nullptr;
  float eps = 0.0f;
};

// n elements of `type` at `in` as fp32 at `out`, on `stream` (a cudaStream_t). Returns the
// cudaError_t of the launch.
int launch_to_float(const void* in, int type, std::size_t n, float* out, void* stream);
// The epilogue of NormArgs, a block per row; the same bits as the custom kernels' rows.
int launch_add_rmsnorm(const NormArgs& args, void* stream);

}  // namespace tpcomm::kernels::cuda
