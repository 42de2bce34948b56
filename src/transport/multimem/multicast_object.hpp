// A multicast object (NVSwitch): created by one rank, shared with the others as a POSIX fd,
// joined by every rank's device, bound to every rank's workspace and mapped, so that one address
// names the same offset in every rank's workspace (multimem instructions). Released on
// destruction (unmapped, unbound, freed).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "control/socket_util.hpp"

namespace tpcomm::transport::cuda {

class MulticastObject {
 public:
  MulticastObject() = default;
  ~MulticastObject();
  MulticastObject(const MulticastObject&) = delete;
  MulticastObject& operator=(const MulticastObject&) = delete;

  // Why `device` cannot take part in multicast, or empty (driver entry points, device attribute).
  static std::string unsupported_reason(int device);
  // The granularity a multicast object of `world` devices needs (the minimum).
  static std::size_t granularity(int world, std::size_t bytes, bool fabric);

  // The creating rank: a new object for `world` devices of `bytes` each, shareable as a POSIX
  // fd (one node) or a fabric handle (several nodes of one NVLink clique).
  void create(int world, std::size_t bytes, bool fabric);
  net::Fd export_fd() const;
  CUmemFabricHandle export_fabric() const;
  // The other ranks: the creator's object, from its descriptor or fabric handle.
  void import(int fd, std::size_t bytes);
  void import(const CUmemFabricHandle& handle, std::size_t bytes);
  // Every rank, after create/import; every device must be added before any binds memory.
  void add_device(int device);
  // Binds `memory` (this rank's workspace, `bytes` long) at offset 0 and maps the object.
  void* bind_and_map(CUmemGenericAllocationHandle memory);
  // Unmaps, unbinds and frees the object (once; the destructor does it otherwise). The owner's
  // device must be current and drained, and the peers met (teardown_barrier.hpp).
  void release();

 private:
  CUmemGenericAllocationHandle handle_ = 0;
  std::size_t bytes_ = 0;
  CUdevice device_ = 0;
  int ordinal_ = 0;  // device_'s runtime ordinal (the mapping's access)
  bool bound_ = false;
  CUdeviceptr va_ = 0;
  bool mapped_ = false;
};

}  // namespace tpcomm::transport::cuda
