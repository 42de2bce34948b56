// Device memory that frees itself (device_memory.hpp).
#include "device_memory.hpp"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "device_guard.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::cuda {

std::shared_ptr<void> device_alloc(std::size_t bytes, int device) {
  // cudaMalloc allocates on the current device, which calls leave as the caller had it
  // (docs/gpu-graphs.md, "The caller's current device").
  const DeviceGuard on_device(device);
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorCode::kUnavailable, fmt::format("cudaMalloc of {} bytes on device {}: {}",
                                                     bytes, device, cudaGetErrorString(e)));
  }
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

}  // namespace tpcomm::transport::cuda
