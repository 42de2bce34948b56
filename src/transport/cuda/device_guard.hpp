// Makes a communicator's device current for the length of a call and gives the caller's thread
// its own current device back afterwards, as NCCL does: a call from a thread whose current
// device is another GPU would otherwise launch there.
#pragma once

#include <cuda_runtime_api.h>

#include <new>

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
    current_ = true;
  }
  // For destructors and failure paths: never throws; when the device cannot be made current,
  // nothing changes (and current() says so).
  DeviceGuard(int device, std::nothrow_t) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    current_ = previous_ == device || cudaSetDevice(device) == cudaSuccess;
    changed_ = current_ && previous_ != device && previous_ >= 0;
    cudaGetLastError();
  }
  bool current() const { return current_; }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
  bool current_ = false;
};

}  // namespace tpcomm::transport::cuda
