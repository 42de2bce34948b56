// The ranks meet before a multicast object goes (review N16): a fast rank that unbinds its memory
// and releases the object while a slow peer still issues multimem.red / multimem.st to the group
// (its last barrier add) leaves that peer writing to a group that is coming apart, which CUDA does
// not define; NCCL finalises NVLS with a barrier before freeing too. Custom (P2P) workspaces need
// none: a peer's import keeps the memory alive.
#pragma once

#include <chrono>

#include "tpcomm/bootstrap.hpp"

namespace tpcomm::transport::cuda {

// Meets every rank within `limit`, unless the communicator was aborted (peers may be dead: the
// wait would only delay the end). Never throws (it runs in destructors): a barrier that fails or
// runs out of time is logged and the teardown goes on. Returns whether every rank met.
bool meet_before_teardown(Bootstrap& bootstrap, bool aborted, std::chrono::milliseconds limit,
                          const char* what);

}  // namespace tpcomm::transport::cuda
