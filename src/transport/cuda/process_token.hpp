// Which process a buffer's address belongs to, so that a peer in the same process reads it as is
// and a peer elsewhere maps it through a handle (graph buffer registration).
#pragma once

#include <cstdint>

namespace tpcomm::transport::cuda {

// This process among all processes of all nodes, and among the children it forks: a random token
// drawn once and mixed with the boot id, then with the pid and the fork generation on every call.
// A pid alone is not enough (ranks in different PID namespaces, or on different nodes, share
// pids); the token alone is not either (a fork() child inherits it, and the child cannot read its
// parent's raw addresses).
std::uint64_t this_process();

}  // namespace tpcomm::transport::cuda
