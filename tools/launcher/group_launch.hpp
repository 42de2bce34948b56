// The group one `tpcomm run` launches: its store, secret and name, and the port torch's own
// store gets (group_launch.cpp).
#pragma once

#include <memory>

#include "rank_process.hpp"
#include "sim_nodes/sim_nodes.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm::cli {

// Serves the group's new store (on node 0's address with the node network, else loopback) and
// fills `group`: its port, secret and name, and a free port for torch.distributed's store.
std::unique_ptr<TcpStoreServer> serve_new_group(GroupLaunch& group, const SimulatedNodes* nodes);

}  // namespace tpcomm::cli
