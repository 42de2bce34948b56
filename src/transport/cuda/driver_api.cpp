// Resolving the driver entry points through the CUDA runtime (linked statically).
#include "driver_api.hpp"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport::cuda {
namespace {

// The ABI version the entry points are requested at (CUDA 12.0 signatures).
constexpr int kEntryPointVersion = 12000;

template <typename F>
bool resolve(const char* symbol, F& out, std::string* missing) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, kEntryPointVersion, cudaEnableDefault,
                                       &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess || fn == nullptr) {
    if (missing != nullptr) *missing = symbol;
    return false;
  }
  out = reinterpret_cast<F>(fn);
  return true;
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
  DriverApi& a = l.api;
  const bool ok =
      resolve("cuMemGetAllocationGranularity", a.mem_get_allocation_granularity, &missing) &&
      resolve("cuMemCreate", a.mem_create, &missing) &&
      resolve("cuMemRelease", a.mem_release, &missing) &&
      resolve("cuMemExportToShareableHandle", a.mem_export, &missing) &&
      resolve("cuMemImportFromShareableHandle", a.mem_import, &missing) &&
      resolve("cuMemAddressReserve", a.mem_address_reserve, &missing) &&
      resolve("cuMemAddressFree", a.mem_address_free, &missing) &&
      resolve("cuMemMap", a.mem_map, &missing) && resolve("cuMemUnmap", a.mem_unmap, &missing) &&
      resolve("cuMemSetAccess", a.mem_set_access, &missing) &&
      resolve("cuGetErrorString", a.get_error_string, &missing) &&
      resolve("cuMemGetAddressRange", a.mem_get_address_range, &missing) &&
      resolve("cuMemRetainAllocationHandle", a.mem_retain_allocation_handle, &missing);
  if (!ok) {
    l.error = fmt::format("the CUDA driver lacks {} (driver older than CUDA 12?)", missing);
    return l;
  }
  // Optional: multicast.
  resolve("cuMulticastCreate", a.multicast_create, nullptr);
  resolve("cuMulticastAddDevice", a.multicast_add_device, nullptr);
  resolve("cuMulticastBindMem", a.multicast_bind_mem, nullptr);
  resolve("cuMulticastGetGranularity", a.multicast_get_granularity, nullptr);
  resolve("cuMulticastUnbind", a.multicast_unbind, nullptr);
  resolve("cuDeviceGet", a.device_get, nullptr);
  resolve("cuDeviceGetAttribute", a.device_get_attribute, nullptr);
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

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
