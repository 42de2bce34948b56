// The few CUDA driver entry points the probe needs, loaded with dlopen so that tpcomm builds and
// runs without a driver. Constants are copied from cuda.h (a stable ABI) and checked against it
// at compile time when the toolkit is present.
#pragma once

#include <memory>
#include <string>

#include "common/shared_library.hpp"

namespace tpcomm::probe {

namespace cu {
constexpr int kSuccess = 0;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kAttrVirtualMemoryManagement = 102;
constexpr int kAttrHandleTypePosixFd = 103;
constexpr int kAttrHandleTypeFabric = 128;
constexpr int kAttrMulticastSupported = 132;
}  // namespace cu

class CudaDriver {
 public:
  // nullptr when libcuda.so.1 or one of its symbols is missing; `why_not` then says which.
  static std::unique_ptr<CudaDriver> load(std::string* why_not);

  // Driver error text, e.g. "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
  std::string error_text(int result) const;

  int (*init)(unsigned flags) = nullptr;
  int (*driver_version)(int* version) = nullptr;
  int (*device_count)(int* count) = nullptr;
  int (*device_get)(int* device, int ordinal) = nullptr;
  int (*device_attribute)(int* value, int attribute, int device) = nullptr;
  int (*can_access_peer)(int* can, int device, int peer) = nullptr;
  int (*pci_bus_id)(char* bus_id, int length, int device) = nullptr;
  int (*error_name)(int result, const char** name) = nullptr;
  int (*error_string)(int result, const char** text) = nullptr;

 private:
  CudaDriver() = default;
  std::unique_ptr<common::SharedLibrary> library_;
};

}  // namespace tpcomm::probe
