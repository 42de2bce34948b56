// Simulated nodes for in-process tests: the platform's node-identity hook says which node each
// thread rank is on, so a group of threads plans hier without root or namespaces.
#pragma once

#include <vector>

#include "runtime/communicator_state.hpp"

namespace tpcomm::test {

// Ranks dealt to `nodes` nodes in turn (6 ranks on 2 nodes: 0, 2, 4 and 1, 3, 5): no node holds
// consecutive ranks, so hier must put every block back in rank order.
inline runtime::Platform nodes_in_turn(int nodes) {
  runtime::Platform p = runtime::builtin_platform();
  p.node_of_ranks = [nodes](int size) {
    std::vector<int> node(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) node[static_cast<std::size_t>(r)] = r % nodes;
    return node;
  };
  return p;
}

// Consecutive ranks, `per_node` on each node (2: ranks 0-1 on node 0, 2-3 on node 1, ...).
inline runtime::Platform consecutive_nodes_of(int per_node) {
  runtime::Platform p = runtime::builtin_platform();
  p.node_of_ranks = [per_node](int size) {
    std::vector<int> node(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) node[static_cast<std::size_t>(r)] = r / per_node;
    return node;
  };
  return p;
}

}  // namespace tpcomm::test
