// Device memory that frees itself: cudaMalloc on a given device (the caller's current device
// comes back), freed by cudaFree when the last owner lets go. For scratch that CUDA graphs may
// point at (graph_safe_scratch.hpp keeps such buffers alive).
#pragma once

#include <cstddef>
#include <memory>

namespace tpcomm::transport::cuda {

// `bytes` on `device`; throws kUnavailable naming the size and the device when cudaMalloc fails.
std::shared_ptr<void> device_alloc(std::size_t bytes, int device);

}  // namespace tpcomm::transport::cuda
