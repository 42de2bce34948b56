// `tpcomm topo`'s NUMA lines: this machine's nodes and their CPUs, and the group's node map: for
// N ranks started with --bind-to core, each rank's CPUs, the node(s) its pages are bound to
// (transport/cpu/numa_placement) and the team its calls get (transport/cpu/thread_team).
#pragma once

#include <string>

namespace tpcomm::cli {

// "2 nodes: node 0 cpus 0-27, node 1 cpus 28-55".
std::string numa_nodes_text();

// One line per rank of a group of `ranks` bound as tpcomm run --bind-to core binds them with
// TPCOMM_THREADS = `threads` (0: the default share).
std::string group_node_map(int ranks, int threads);

}  // namespace tpcomm::cli
