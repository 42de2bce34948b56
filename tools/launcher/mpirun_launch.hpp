// `--launch mpirun` of tpcomm run, bench and tune: the ranks started by mpirun instead of
// tpcomm's own launcher, so that they bootstrap through MPI (mpirun without MASTER_ADDR) and a
// group across nodes can run hier_mpi. On one node mpirun is simply exec'd; over simulated nodes
// it runs in node 0's namespaces and reaches the others through `tpcomm node-agent`
// (mpirun_over_nodes.hpp).
#pragma once

#include <string>

#include "launcher.hpp"

namespace tpcomm::cli {

// Runs `l.command` as `l.ranks` ranks under mpirun; `one_node_binding` is mpirun's --bind-to on
// one node (over simulated nodes, ranks are not bound: the nodes share this machine's cores).
// Refuses (kInvalidInput) ranks that do not divide among the nodes and nodes without their own
// network; kUnavailable without mpirun. On one node it does not return unless exec fails.
int launch_under_mpirun(LaunchOptions l, const std::string& self,
                        const std::string& one_node_binding);

}  // namespace tpcomm::cli
