#include "peer_reach.hpp"

#include <fmt/format.h>

namespace tpcomm::transport::cuda {

namespace {
// CU_MEM_ACCESS_FLAGS_PROT_READ (1) and PROT_READWRITE (3): read is bit 0 of both.
constexpr unsigned long long kProtRead = 1;
}  // namespace

std::string peer_read_refusal(const PeerBufferFacts& f) {
  if (f.owner_device != f.reader_device && !f.can_access_peer) {
    return fmt::format(
        "a peer thread's buffer is on GPU {}, which GPU {} cannot access (no peer access "
        "between them)",
        f.owner_device, f.reader_device);
  }
  if (f.vmm_access && (*f.vmm_access & kProtRead) == 0) {
    return fmt::format(
        "a peer thread's buffer on GPU {} is VMM memory (cuMemMap) that GPU {} was not granted "
        "access to (cuMemSetAccess); peer access covers cudaMalloc memory only",
        f.owner_device, f.reader_device);
  }
  return "";
}

}  // namespace tpcomm::transport::cuda
