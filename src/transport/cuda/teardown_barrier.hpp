// The ranks meet before a multicast object goes (docs/gpu-graphs.md, "Multimem teardown meets the
// peers"): a fast rank that unbinds its memory and releases the object while a slow peer still
// issues multimem.red / multimem.st to the group (its last barrier add) leaves that peer writing to
// a group that is coming apart, which CUDA does not define; NCCL finalises NVLS with a barrier
// before freeing too. Custom (P2P) workspaces need none: a peer's import keeps the memory alive.
#pragma once

#include <chrono>
#include <functional>

#include "tpcomm/bootstrap.hpp"

namespace tpcomm::transport::cuda {

// Meets every rank within `limit`, unless the communicator was aborted (peers may be dead: the
// wait would only delay the end). Never throws (it runs in destructors): a barrier that fails or
// runs out of time is logged and the teardown goes on. Returns whether every rank met.
bool meet_before_teardown(Bootstrap& bootstrap, bool aborted, std::chrono::milliseconds limit,
                          const char* what);

// The order of a multicast object's teardown: this rank's device drained (no kernel of ours still
// adds to the group), every rank met (`meet`, usually meet_before_teardown), then the object
// unmapped, unbound and released. Each step runs whatever the one before did: a rank that could
// not drain or meet still releases (its peers' waits are bounded). None may throw.
struct MulticastTeardown {
  std::function<void()> drain;
  std::function<bool()> meet;
  std::function<void()> release;
};
// Returns what `meet` returned.
bool tear_down_multicast(const MulticastTeardown& steps) noexcept;

}  // namespace tpcomm::transport::cuda
