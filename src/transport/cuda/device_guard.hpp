// Makes a communicator's device current for the length of a call and gives the caller's thread
// its own current device back afterwards, as NCCL does: a call from a thread whose current
// device is another GPU would otherwise launch there, and a program with several GPUs per
// process would find its later allocations on the communicator's GPU (docs/gpu-graphs.md, "The
// caller's current device"). The logic is basic_device_guard.hpp's, tested on the host with a fake
// runtime.
#pragma once

#include <cuda_runtime_api.h>

#include "basic_device_guard.hpp"
#include "driver_api.hpp"

namespace tpcomm::transport::cuda {

struct CudaRuntimeDevice {
  static int get_device(int* device) { return static_cast<int>(cudaGetDevice(device)); }
  static int set_device(int device) { return static_cast<int>(cudaSetDevice(device)); }
  static void clear_error() { cudaGetLastError(); }
  static void fail(int error, const char* what) {
    if (error != 0) cudaGetLastError();
    check_cuda(error, what);
  }
};

using DeviceGuard = BasicDeviceGuard<CudaRuntimeDevice>;

}  // namespace tpcomm::transport::cuda
