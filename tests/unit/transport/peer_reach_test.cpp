// Whether a same-process peer's buffer may be read in place (docs/gpu-graphs.md, "VMM buffers of a
// same-process peer on another GPU"; peer_reach.hpp): peer access is not enough for VMM memory the
// owner did not grant this GPU.
#include <gtest/gtest.h>

#include "transport/custom/peer_reach.hpp"

namespace tpcomm {
namespace {

using transport::cuda::peer_read_refusal;
using transport::cuda::PeerBufferFacts;

PeerBufferFacts facts(int reader, int owner, bool peer, std::optional<unsigned long long> vmm) {
  PeerBufferFacts f;
  f.reader_device = reader;
  f.owner_device = owner;
  f.can_access_peer = peer;
  f.vmm_access = vmm;
  return f;
}

TEST(PeerReach, CudaMallocMemoryNeedsOnlyPeerAccess) {
  EXPECT_EQ(peer_read_refusal(facts(0, 1, true, std::nullopt)), "");
  EXPECT_EQ(peer_read_refusal(facts(0, 0, false, std::nullopt)), "");
  const std::string no_peer = peer_read_refusal(facts(0, 1, false, std::nullopt));
  EXPECT_NE(no_peer.find("GPU 1, which GPU 0 cannot access"), std::string::npos) << no_peer;
}

TEST(PeerReach, VmmMemoryOnAnotherGpuNeedsItsOwnersGrant) {
  // PyTorch's expandable segments grant the owner's device only: flags 0 for this one.
  const std::string refused = peer_read_refusal(facts(0, 1, true, 0ull));
  EXPECT_NE(refused.find("VMM memory"), std::string::npos) << refused;
  EXPECT_NE(refused.find("GPU 0 was not granted"), std::string::npos) << refused;
  EXPECT_EQ(peer_read_refusal(facts(0, 1, true, 3ull)), "") << "PROT_READWRITE granted";
  EXPECT_EQ(peer_read_refusal(facts(0, 1, true, 1ull)), "") << "PROT_READ granted";
}

TEST(PeerReach, NoPeerAccessIsRefusedWhateverTheGrant) {
  EXPECT_NE(peer_read_refusal(facts(2, 3, false, 3ull)), "");
}

}  // namespace
}  // namespace tpcomm
