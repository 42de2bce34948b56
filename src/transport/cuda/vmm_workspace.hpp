// This rank's kernel workspace, allocated with the VMM API (cuMemCreate) so that it can be
// exported, and the peers' workspaces imported and mapped into this process. Within a node the
// export is a POSIX file descriptor (passed over a Unix socket); across the nodes of one NVLink
// clique it is a fabric handle (64 bytes, passed through the bootstrap; needs an IMEX channel).
// Everything is unmapped and released on destruction.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "control/socket_util.hpp"

namespace tpcomm::transport::cuda {

class VmmWorkspace {
 public:
  VmmWorkspace() = default;
  ~VmmWorkspace();
  VmmWorkspace(const VmmWorkspace&) = delete;
  VmmWorkspace& operator=(const VmmWorkspace&) = delete;

  enum class Sharing { kPosixFd, kFabric };

  // The allocation granularity of `device` for exportable memory.
  static std::size_t granularity(int device, Sharing sharing = Sharing::kPosixFd);
  // Allocates and maps `bytes` (a multiple of the granularity) on `device`, zeroed.
  void create(int device, std::size_t bytes, Sharing sharing = Sharing::kPosixFd);
  // A new descriptor for the allocation (the caller owns it).
  net::Fd export_fd() const;
  // The allocation's fabric handle (kFabric).
  CUmemFabricHandle export_fabric() const;
  // Imports a peer's allocation and maps it here, readable and writable by `device`.
  void* map_peer(int fd, std::size_t bytes);
  void* map_peer(const CUmemFabricHandle& handle, std::size_t bytes);

  // For an object that only maps peers' allocations (no create()): the device that accesses them.
  void use_device(int device) { device_ = device; }

  void* own() const { return own_.address; }
  CUmemGenericAllocationHandle handle() const { return own_.handle; }
  std::size_t bytes() const { return own_.bytes; }

 private:
  struct Mapping {
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr va = 0;
    void* address = nullptr;
    std::size_t bytes = 0;
  };
  void map(Mapping& m);
  void* import_and_map(void* shareable, CUmemAllocationHandleType type, std::size_t bytes);
  void release(Mapping& m);

  int device_ = 0;
  Mapping own_;
  std::vector<Mapping> peers_;
};

}  // namespace tpcomm::transport::cuda
