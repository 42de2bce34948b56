// The names of the CUDA kernel layer (src/kernels/cuda) that the GPU backends' host code uses: the
// workspace and multicast layouts both sides compute, the kernels' argument blocks and entry
// points, and the failure codes a kernel leaves for the host. Declared here once, so the host code
// in tpcomm::transport::cuda names them as its own and every use of the kernel layer is listed.
#pragma once

#include "kernels/cuda/cuda_layout.hpp"
#include "kernels/cuda/custom_kernel_args.hpp"
#include "kernels/cuda/kernel_codes.hpp"
#include "kernels/cuda/multimem_kernel_args.hpp"
#include "kernels/cuda/multimem_layout.hpp"

namespace tpcomm::transport::cuda {

namespace kernel_code = kernels::cuda::kernel_code;

// Layout (cuda_layout.hpp, multimem_layout.hpp).
using kernels::cuda::blocks_for;
using kernels::cuda::chunk_count;
using kernels::cuda::chunk_elements;
using kernels::cuda::kMaxBlocks;
using kernels::cuda::kMaxRanks;
using kernels::cuda::kPhases;
using kernels::cuda::kVecBytes;
using kernels::cuda::multimem_chunk_elements;
using kernels::cuda::multimem_layout;
using kernels::cuda::MultimemLayout;
using kernels::cuda::MultimemMode;
using kernels::cuda::pad_index;
using kernels::cuda::Range;
using kernels::cuda::reached;
using kernels::cuda::round_up;
using kernels::cuda::split;
using kernels::cuda::split_vectors;
using kernels::cuda::workspace_layout;
using kernels::cuda::WorkspaceLayout;
using kernels::cuda::world_bucket;

// Arguments and entry points (custom_kernel_args.hpp, multimem_kernel_args.hpp).
using kernels::cuda::KernelArgs;
using kernels::cuda::launch_custom_kernel;
using kernels::cuda::launch_multimem_kernel;
using kernels::cuda::launch_multimem_probe;
using kernels::cuda::launch_multimem_publish_failure;
using kernels::cuda::MultimemArgs;

// Codes (kernel_codes.hpp).
using kernels::cuda::group_failure_cause;
using kernels::cuda::group_failure_origin;
using kernels::cuda::group_failure_value;
using kernels::cuda::KernelFailure;
using kernels::cuda::KernelOp;

}  // namespace tpcomm::transport::cuda
