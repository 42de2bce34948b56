// This rank's custom-kernel workspace, allocated with the VMM API (cuMemCreate) so that it can
// be exported as a POSIX file descriptor, and the peers' workspaces imported and mapped into
// this process. Everything is unmapped and released on destruction.
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

  // The allocation granularity of `device` for exportable memory.
  static std::size_t granularity(int device);
  // Allocates and maps `bytes` (a multiple of the granularity) on `device`, zeroed.
  void create(int device, std::size_t bytes);
  // A new descriptor for the allocation (the caller owns it).
  net::Fd export_fd() const;
  // Imports a peer's allocation and maps it here, readable and writable by `device`.
  void* map_peer(int fd, std::size_t bytes);

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
  void release(Mapping& m);

  int device_ = 0;
  Mapping own_;
  std::vector<Mapping> peers_;
};

}  // namespace tpcomm::transport::cuda
