// The CUDA driver entry points the GPU backends use, resolved through the runtime's entry-point
// query (cudaGetDriverEntryPointByVersion): nothing links against libcuda, so a build with CUDA
// runs on a machine without a driver or a GPU and says why the GPU backends are off.
#pragma once

#include <cuda.h>

#include <string>

namespace tpcomm::transport::cuda {

struct DriverApi {
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemExportToShareableHandle) mem_export = nullptr;
  decltype(&::cuMemImportFromShareableHandle) mem_import = nullptr;
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuMemGetAddressRange) mem_get_address_range = nullptr;
  decltype(&::cuMemRetainAllocationHandle) mem_retain_allocation_handle = nullptr;
  // Multicast (sm_90+ with NVSwitch), optional: null when the driver lacks them.
  decltype(&::cuMulticastCreate) multicast_create = nullptr;
  decltype(&::cuMulticastAddDevice) multicast_add_device = nullptr;
  decltype(&::cuMulticastBindMem) multicast_bind_mem = nullptr;
  decltype(&::cuMulticastGetGranularity) multicast_get_granularity = nullptr;
  decltype(&::cuMulticastUnbind) multicast_unbind = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
};

// The driver API of this process, or throws kUnavailable saying why (no driver, no device, an
// entry point missing): that text becomes the reason the GPU backends are off.
const DriverApi& driver_api();

// Why the GPU path is unavailable in this process, or empty when a CUDA device is usable.
std::string gpu_unavailable_reason();

// "cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)" and throws kUnavailable.
void check_cu(CUresult r, const char* what);
// The same for runtime calls (cudaError_t as int).
void check_cuda(int error, const char* what);

}  // namespace tpcomm::transport::cuda
