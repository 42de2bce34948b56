// cuMemCreate / export / import / map of the custom workspaces.
#include "vmm_workspace.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdint>

#include "driver_api.hpp"

namespace tpcomm::transport::cuda {
namespace {

CUmemAllocationProp exportable(int device, VmmWorkspace::Sharing sharing) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = sharing == VmmWorkspace::Sharing::kFabric
                               ? CU_MEM_HANDLE_TYPE_FABRIC
                               : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

}  // namespace

std::size_t VmmWorkspace::granularity(int device, Sharing sharing) {
  const DriverApi& d = driver_api();
  CUmemAllocationProp p = exportable(device, sharing);
  std::size_t g = 0;
  check_cu(d.mem_get_allocation_granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
           "cuMemGetAllocationGranularity");
  return g;
}

void VmmWorkspace::create(int device, std::size_t bytes, Sharing sharing) {
  const DriverApi& d = driver_api();
  device_ = device;
  CUmemAllocationProp p = exportable(device, sharing);
  own_.bytes = bytes;
  check_cu(d.mem_create(&own_.handle, bytes, &p, 0), "cuMemCreate (custom workspace)");
  map(own_);
  check_cuda(cudaMemset(own_.address, 0, bytes), "cudaMemset (custom workspace)");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (custom workspace)");
}

net::Fd VmmWorkspace::export_fd() const {
  int fd = -1;
  check_cu(driver_api().mem_export(&fd, own_.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           "cuMemExportToShareableHandle");
  return net::Fd(fd);
}

CUmemFabricHandle VmmWorkspace::export_fabric() const {
  CUmemFabricHandle h{};
  check_cu(driver_api().mem_export(&h, own_.handle, CU_MEM_HANDLE_TYPE_FABRIC, 0),
           "cuMemExportToShareableHandle (fabric; is an IMEX channel available?)");
  return h;
}

void* VmmWorkspace::map_peer(int fd, std::size_t bytes) {
  return import_and_map(reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, bytes);
}

void* VmmWorkspace::map_peer(const CUmemFabricHandle& handle, std::size_t bytes) {
  CUmemFabricHandle copy = handle;
  return import_and_map(&copy, CU_MEM_HANDLE_TYPE_FABRIC, bytes);
}

void* VmmWorkspace::import_and_map(void* shareable, CUmemAllocationHandleType type,
                                   std::size_t bytes) {
  Mapping m;
  m.bytes = bytes;
  check_cu(driver_api().mem_import(&m.handle, shareable, type),
           "cuMemImportFromShareableHandle (a peer's workspace)");
  try {
    map(m);
  } catch (...) {
    release(m);
    throw;
  }
  peers_.push_back(m);
  return m.address;
}

// NOLINTNEXTLINE(readability-make-member-function-const): maps memory into the process
void VmmWorkspace::map(Mapping& m) {
  const DriverApi& d = driver_api();
  check_cu(d.mem_address_reserve(&m.va, m.bytes, 0, 0, 0), "cuMemAddressReserve");
  check_cu(d.mem_map(m.va, m.bytes, 0, m.handle, 0), "cuMemMap");
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check_cu(d.mem_set_access(m.va, m.bytes, &access, 1), "cuMemSetAccess");
  m.address = reinterpret_cast<void*>(m.va);
}

void VmmWorkspace::release(Mapping& m) {
  const DriverApi& d = driver_api();
  if (m.address != nullptr) d.mem_unmap(m.va, m.bytes);
  if (m.va != 0) d.mem_address_free(m.va, m.bytes);
  if (m.handle != 0) d.mem_release(m.handle);
  m = Mapping{};
}

VmmWorkspace::~VmmWorkspace() {
  if (own_.handle == 0 && peers_.empty()) return;
  cudaDeviceSynchronize();  // no kernel may still use a mapping we remove
  for (auto& m : peers_) release(m);
  release(own_);
}

}  // namespace tpcomm::transport::cuda
