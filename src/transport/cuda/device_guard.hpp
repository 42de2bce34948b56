// Makes a communicator's device current for the length of a call and gives the caller's thread
// its own current device back afterwards, as NCCL does: a call from a thread whose current
// device is another GPU would otherwise launch there.
#pragma once

#include <cuda_runtime_api.h>

#include "driver_api.hpp"

namespace tpcomm::transport::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
    changed_ = previous_ != device && previous_ >= 0;
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

}  // namespace tpcomm::transport::cuda
