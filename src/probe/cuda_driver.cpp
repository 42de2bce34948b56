// Loading the CUDA driver library at run time.
#include "cuda_driver.hpp"

#include <fmt/format.h>

#ifdef TPCOMM_HAVE_CUDA_HEADERS
#include <cuda.h>
static_assert(tpcomm::probe::cu::kAttrComputeCapabilityMajor ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(tpcomm::probe::cu::kAttrComputeCapabilityMinor ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(tpcomm::probe::cu::kAttrVirtualMemoryManagement ==
              CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
static_assert(tpcomm::probe::cu::kAttrHandleTypePosixFd ==
              CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
static_assert(tpcomm::probe::cu::kAttrHandleTypeFabric ==
              CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED);
static_assert(tpcomm::probe::cu::kAttrMulticastSupported ==
              CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED);
#endif

namespace tpcomm::probe {

std::unique_ptr<CudaDriver> CudaDriver::load(std::string* why_not) {
  std::string err;
  auto library = common::SharedLibrary::open("libcuda.so.1", &err);
  if (!library) {
    *why_not = fmt::format(
        "the CUDA driver library libcuda.so.1 could not be loaded ({}): no NVIDIA driver on this "
        "machine",
        err);
    return nullptr;
  }
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  library->bind(d->init, "cuInit");
  library->bind(d->driver_version, "cuDriverGetVersion");
  library->bind(d->device_count, "cuDeviceGetCount");
  library->bind(d->device_get, "cuDeviceGet");
  library->bind(d->device_attribute, "cuDeviceGetAttribute");
  library->bind(d->can_access_peer, "cuDeviceCanAccessPeer");
  library->bind(d->pci_bus_id, "cuDeviceGetPCIBusId");
  library->bind(d->error_name, "cuGetErrorName");
  library->bind(d->error_string, "cuGetErrorString");
  if (!library->missing().empty()) {
    *why_not = fmt::format("libcuda.so.1 lacks {}: the driver is too old or not NVIDIA's",
                           library->missing());
    return nullptr;
  }
  d->library_ = std::move(library);
  return d;
}

std::string CudaDriver::error_text(int result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (error_name(result, &name) != cu::kSuccess || name == nullptr) name = "CUDA error";
  if (error_string(result, &text) != cu::kSuccess || text == nullptr) text = "no description";
  return fmt::format("{} {} ({})", name, result, text);
}

}  // namespace tpcomm::probe
