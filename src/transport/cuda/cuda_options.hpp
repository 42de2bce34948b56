// What the GPU backends (custom, multimem, nccl) are built with, beside the group's description
// (BackendContext).
#pragma once

#include <chrono>
#include <cstddef>

namespace tpcomm::transport::cuda {

struct CudaOptions {
  int device = 0;  // this rank's CUDA device
  // How long a GPU kernel's wait for a peer may spin before it gives up (TPCOMM_KERNEL_TIMEOUT_MS);
  // 0: the communicator's timeout. Longer than the host's by default: one rank's host stall
  // shorter than this (a checkpoint or adapter load) must not fail the group's kernels for good.
  std::chrono::milliseconds kernel_timeout{0};
  std::size_t graph_slots = 16384;  // captured calls that may be registered (TPCOMM_GRAPH_SLOTS)
  bool zero_copy = false;           // the graph plan lets user buffers be read in place (custom)
};

}  // namespace tpcomm::transport::cuda
