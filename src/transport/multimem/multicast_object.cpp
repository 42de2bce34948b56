// cuMulticast* create / share / add / bind / map (multicast_object.hpp).
#include "multicast_object.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

#include <fmt/format.h>

#include "transport/cuda/driver_api.hpp"

namespace tpcomm::transport::cuda {
namespace {

CUmulticastObjectProp properties(int world, std::size_t bytes, bool fabric) {
  CUmulticastObjectProp p{};
  p.numDevices = static_cast<unsigned int>(world);
  p.size = bytes;
  p.handleTypes = fabric ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

}  // namespace

std::string MulticastObject::unsupported_reason(int device) {
  if (std::string why = gpu_unavailable_reason(); !why.empty()) return why;
  const DriverApi& d = driver_api();
  if (d.multicast_create == nullptr) {
    return fmt::format("the CUDA driver does not provide {} (multicast needs a CUDA 12.1 driver)",
                       d.multicast_missing);
  }
  CUdevice dev = 0;
  int supported = 0;
  if (d.device_get(&dev, device) != CUDA_SUCCESS ||
      d.device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev) !=
          CUDA_SUCCESS) {
    return fmt::format("cannot read CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED of device {}", device);
  }
  if (supported == 0) {
    return fmt::format(
        "device {} does not support multicast (no NVSwitch, or the fabric manager "
        "is not running)",
        device);
  }
  return std::string();
}

std::size_t MulticastObject::granularity(int world, std::size_t bytes, bool fabric) {
  const CUmulticastObjectProp p = properties(world, bytes, fabric);
  std::size_t g = 0;
  check_cu(driver_api().multicast_get_granularity(&g, &p, CU_MULTICAST_GRANULARITY_RECOMMENDED),
           "cuMulticastGetGranularity");
  return g;
}

void MulticastObject::create(int world, std::size_t bytes, bool fabric) {
  const CUmulticastObjectProp p = properties(world, bytes, fabric);
  check_cu(driver_api().multicast_create(&handle_, &p), "cuMulticastCreate");
  bytes_ = bytes;
}

net::Fd MulticastObject::export_fd() const {
  int fd = -1;
  check_cu(driver_api().mem_export(&fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           "cuMemExportToShareableHandle (multicast object)");
  return net::Fd(fd);
}

CUmemFabricHandle MulticastObject::export_fabric() const {
  CUmemFabricHandle h{};
  check_cu(driver_api().mem_export(&h, handle_, CU_MEM_HANDLE_TYPE_FABRIC, 0),
           "cuMemExportToShareableHandle (multicast object, fabric; is an IMEX channel "
           "available?)");
  return h;
}

void MulticastObject::import(const CUmemFabricHandle& handle, std::size_t bytes) {
  CUmemFabricHandle copy = handle;
  check_cu(driver_api().mem_import(&handle_, &copy, CU_MEM_HANDLE_TYPE_FABRIC),
           "cuMemImportFromShareableHandle (multicast object, fabric)");
  bytes_ = bytes;
}

void MulticastObject::import(int fd, std::size_t bytes) {
  check_cu(
      driver_api().mem_import(&handle_, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
      "cuMemImportFromShareableHandle (multicast object)");
  bytes_ = bytes;
}

void MulticastObject::add_device(int device) {
  const DriverApi& d = driver_api();
  check_cu(d.device_get(&device_, device), "cuDeviceGet");
  ordinal_ = device;
  check_cu(d.multicast_add_device(handle_, device_), "cuMulticastAddDevice");
}

void* MulticastObject::bind_and_map(CUmemGenericAllocationHandle memory) {
  const DriverApi& d = driver_api();
  check_cu(d.multicast_bind_mem(handle_, 0, memory, 0, bytes_, 0), "cuMulticastBindMem");
  bound_ = true;
  check_cu(d.mem_address_reserve(&va_, bytes_, 0, 0, 0), "cuMemAddressReserve (multicast)");
  check_cu(d.mem_map(va_, bytes_, 0, handle_, 0), "cuMemMap (multicast)");
  mapped_ = true;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = ordinal_;  // the device added, whichever is current
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check_cu(d.mem_set_access(va_, bytes_, &access, 1), "cuMemSetAccess (multicast)");
  return reinterpret_cast<void*>(va_);
}

MulticastObject::~MulticastObject() {
  release();
}

void MulticastObject::release() {
  if (handle_ == 0) return;
  const DriverApi& d = driver_api();
  cudaDeviceSynchronize();  // no kernel may still use the mapping
  if (mapped_) d.mem_unmap(va_, bytes_);
  if (va_ != 0) d.mem_address_free(va_, bytes_);
  if (bound_) d.multicast_unbind(handle_, device_, 0, bytes_);
  d.mem_release(handle_);
  handle_ = 0;
  va_ = 0;
  mapped_ = bound_ = false;
}

}  // namespace tpcomm::transport::cuda
