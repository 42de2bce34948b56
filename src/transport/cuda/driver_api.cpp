// Resolving the driver entry points through the CUDA runtime (linked statically).
#include "driver_api.hpp"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <type_traits>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport::cuda {
namespace {

template <typename F>
bool resolve(const EntryPointQuery& query, const char* symbol, int version, F& out,
             std::string* missing) {
  void* fn = query(symbol, version);
  if (fn == nullptr) {
    if (missing != nullptr) *missing = fmt::format("{} at entry point version {}", symbol, version);
    return false;
  }
  out = reinterpret_cast<F>(fn);
  return true;
}

void* query_runtime(const char* symbol, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &status) !=
          cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return fn;
}

struct Loaded {
  DriverApi api;
  std::string error;  // empty when usable
};

Loaded load() {
  Loaded l;
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess) {
    l.error =
        e == cudaErrorInsufficientDriver
            ? "no usable CUDA driver (libcuda.so.1 missing, or older than the CUDA runtime "
              "tpcomm was built with)"
            : fmt::format("CUDA runtime: {} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError();  // clear the sticky error for later callers
    return l;
  }
  if (devices == 0) {
    l.error = "no CUDA device visible to this process";
    return l;
  }
  std::string missing;
  l.api = resolve_driver_api(query_runtime, &missing);
  if (!missing.empty()) {
    l.error = fmt::format("the CUDA driver lacks {} (driver older than CUDA 12?)", missing);
  }
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

// Each field has the signature of the version it is requested at below.
#define TPCOMM_SAME_ABI(field, pfn) \
  static_assert(std::is_same_v<decltype(DriverApi::field), pfn>, #field " is not " #pfn)
TPCOMM_SAME_ABI(mem_get_allocation_granularity, PFN_cuMemGetAllocationGranularity_v10020);
TPCOMM_SAME_ABI(mem_create, PFN_cuMemCreate_v10020);
TPCOMM_SAME_ABI(mem_release, PFN_cuMemRelease_v10020);
TPCOMM_SAME_ABI(mem_export, PFN_cuMemExportToShareableHandle_v10020);
TPCOMM_SAME_ABI(mem_import, PFN_cuMemImportFromShareableHandle_v10020);
TPCOMM_SAME_ABI(mem_address_reserve, PFN_cuMemAddressReserve_v10020);
TPCOMM_SAME_ABI(mem_address_free, PFN_cuMemAddressFree_v10020);
TPCOMM_SAME_ABI(mem_map, PFN_cuMemMap_v10020);
TPCOMM_SAME_ABI(mem_unmap, PFN_cuMemUnmap_v10020);
TPCOMM_SAME_ABI(mem_set_access, PFN_cuMemSetAccess_v10020);
TPCOMM_SAME_ABI(mem_get_access, PFN_cuMemGetAccess_v10020);
TPCOMM_SAME_ABI(get_error_string, PFN_cuGetErrorString_v6000);
TPCOMM_SAME_ABI(mem_get_address_range, PFN_cuMemGetAddressRange_v3020);
TPCOMM_SAME_ABI(mem_retain_allocation_handle, PFN_cuMemRetainAllocationHandle_v11000);
TPCOMM_SAME_ABI(device_get, PFN_cuDeviceGet_v2000);
TPCOMM_SAME_ABI(device_get_attribute, PFN_cuDeviceGetAttribute_v2000);
TPCOMM_SAME_ABI(multicast_create, PFN_cuMulticastCreate_v12010);
TPCOMM_SAME_ABI(multicast_add_device, PFN_cuMulticastAddDevice_v12010);
TPCOMM_SAME_ABI(multicast_bind_mem, PFN_cuMulticastBindMem_v12010);
TPCOMM_SAME_ABI(multicast_get_granularity, PFN_cuMulticastGetGranularity_v12010);
TPCOMM_SAME_ABI(multicast_unbind, PFN_cuMulticastUnbind_v12010);
#undef TPCOMM_SAME_ABI

DriverApi resolve_driver_api(const EntryPointQuery& query, std::string* missing) {
  DriverApi a;
  // Versions: cudaTypedefs.h's PFN_<symbol>_v<version> of each signature used here.
  const bool ok = resolve(query, "cuMemGetAllocationGranularity", 10020,
                          a.mem_get_allocation_granularity, missing) &&
                  resolve(query, "cuMemCreate", 10020, a.mem_create, missing) &&
                  resolve(query, "cuMemRelease", 10020, a.mem_release, missing) &&
                  resolve(query, "cuMemExportToShareableHandle", 10020, a.mem_export, missing) &&
                  resolve(query, "cuMemImportFromShareableHandle", 10020, a.mem_import, missing) &&
                  resolve(query, "cuMemAddressReserve", 10020, a.mem_address_reserve, missing) &&
                  resolve(query, "cuMemAddressFree", 10020, a.mem_address_free, missing) &&
                  resolve(query, "cuMemMap", 10020, a.mem_map, missing) &&
                  resolve(query, "cuMemUnmap", 10020, a.mem_unmap, missing) &&
                  resolve(query, "cuMemSetAccess", 10020, a.mem_set_access, missing) &&
                  resolve(query, "cuMemGetAccess", 10020, a.mem_get_access, missing) &&
                  resolve(query, "cuGetErrorString", 6000, a.get_error_string, missing) &&
                  resolve(query, "cuMemGetAddressRange", 3020, a.mem_get_address_range, missing) &&
                  resolve(query, "cuMemRetainAllocationHandle", 11000,
                          a.mem_retain_allocation_handle, missing) &&
                  resolve(query, "cuDeviceGet", 2000, a.device_get, missing) &&
                  resolve(query, "cuDeviceGetAttribute", 2000, a.device_get_attribute, missing);
  if (!ok) return a;
  // Optional: multicast, from CUDA 12.1.
  if (!(resolve(query, "cuMulticastCreate", 12010, a.multicast_create, &a.multicast_missing) &&
        resolve(query, "cuMulticastAddDevice", 12010, a.multicast_add_device,
                &a.multicast_missing) &&
        resolve(query, "cuMulticastBindMem", 12010, a.multicast_bind_mem, &a.multicast_missing) &&
        resolve(query, "cuMulticastGetGranularity", 12010, a.multicast_get_granularity,
                &a.multicast_missing) &&
        resolve(query, "cuMulticastUnbind", 12010, a.multicast_unbind, &a.multicast_missing))) {
    a.multicast_create = nullptr;  // all or none
  }
  return a;
}

const DriverApi& driver_api() {
  if (!loaded().error.empty()) throw Error(ErrorCode::kUnavailable, loaded().error);
  return loaded().api;
}

std::string gpu_unavailable_reason() {
  return loaded().error;
}

void check_cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  if (loaded().api.get_error_string != nullptr) loaded().api.get_error_string(r, &text);
  throw Error(ErrorCode::kUnavailable,
              fmt::format("{} failed: CUresult {} ({})", what, static_cast<int>(r),
                          text != nullptr ? text : "unknown"));
}

void check_cuda(int error, const char* what) {
  if (error == cudaSuccess) return;
  const auto e = static_cast<cudaError_t>(error);
  throw Error(ErrorCode::kUnavailable,
              fmt::format("{} failed: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}

}  // namespace tpcomm::transport::cuda
