// The CUDA driver entry points the GPU backends use, resolved through the runtime's entry-point
// query (cudaGetDriverEntryPointByVersion): nothing links against libcuda, so a build with CUDA
// runs on a machine without a driver or a GPU and says why the GPU backends are off.
#pragma once

#include <cuda.h>

#include <functional>
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
  decltype(&::cuMemGetAccess) mem_get_access = nullptr;
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
  // Why the multicast entry points are absent ("cuMulticastCreate at entry point version 12010"),
  // empty when all are present.
  std::string multicast_missing;
};

// The driver's entry-point query: the function `symbol` has at ABI `version` (CUDA 12.1 = 12010),
// or null. In production cudaGetDriverEntryPointByVersion; in tests a fake driver of any version.
using EntryPointQuery = std::function<void*(const char* symbol, int version)>;

// Resolves every entry point at the version its signature was introduced (the PFN_*_vNNNNN of
// cudaTypedefs.h: the VMM calls at 10020, multicast at 12010, ...): asking for a newer symbol at
// an older version fails, which is how multicast stayed off on every driver. Throws nothing;
// `missing` names the first required symbol and its version when one is absent.
DriverApi resolve_driver_api(const EntryPointQuery& query, std::string* missing);

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
