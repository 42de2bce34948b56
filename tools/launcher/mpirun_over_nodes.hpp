// mpirun across the simulated nodes of `tpcomm run --nodes K` (`tpcomm bench --compare mpi
// --nodes K`). mpirun runs in node 0's namespaces and reaches the other nodes as it reaches
// hosts, through its remote-shell agent: `tpcomm node-agent ADDRESS COMMAND...` joins the
// namespaces of the node with that address and runs the command there with sh, as ssh would on
// a real host. Nodes are named by their addresses (198.18.0.<i + 1>), so mpirun's daemons and
// Open MPI's TCP transport connect over the nodes' links, as on a cluster.
#pragma once

#include <string>
#include <vector>

#include "sim_nodes/sim_nodes.hpp"

namespace tpcomm::cli {

// Where the agent finds each node: "ADDRESS=PATH,PATH,...;..." (the node's namespace files).
inline constexpr const char* kNodeAgentMapVariable = "TPCOMM_NODE_AGENT_MAP";
std::string node_agent_map(const SimulatedNodes& nodes, int count);

// mpirun and its options: `ranks` over `nodes` nodes of ranks / nodes slots each, the agent
// `self node-agent`, Open MPI's TCP transport (and its daemons' wiring) on the nodes' subnet.
std::vector<std::string> mpirun_over_nodes(int ranks, int nodes, const std::string& self);

// tpcomm node-agent ADDRESS COMMAND...: returns only on failure, its exit status (2: the address
// is no node's, or there is no map; 127: the namespaces could not be joined or sh not run).
int run_node_agent(int argc, char** argv);

}  // namespace tpcomm::cli
