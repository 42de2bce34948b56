// Whether this GPU may read a same-process peer's buffer on another GPU by its raw address
// (docs/gpu-graphs.md, "VMM buffers of a same-process peer on another GPU"). Peer access
// (cudaDeviceEnablePeerAccess) covers memory from cudaMalloc only; a buffer of a VMM allocator
// (PyTorch's expandable segments, cuMemMap) is readable from this GPU only where its owner granted
// this device access (cuMemSetAccess), which cuMemGetAccess reports. Reading it otherwise faults
// (an illegal address, sticky for the context).
#pragma once

#include <optional>
#include <string>

namespace tpcomm::transport::cuda {

struct PeerBufferFacts {
  int reader_device = 0;
  int owner_device = 0;
  bool can_access_peer = false;  // cudaDeviceCanAccessPeer(reader, owner)
  // cuMemGetAccess(reader's location, address): the protection flags for a VMM mapping, nullopt
  // for memory that is not a VMM mapping (cudaMalloc).
  std::optional<unsigned long long> vmm_access;
};

// Empty when the reader may read the buffer in place (after enabling peer access where the owner
// is another device); else why not (the buffer then keeps copying).
std::string peer_read_refusal(const PeerBufferFacts& f);

}  // namespace tpcomm::transport::cuda
