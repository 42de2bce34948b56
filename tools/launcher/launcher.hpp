// `tpcomm run`: starts a store and N ranks, prefixes their output with the rank, stops the
// group when one rank fails, forwards Ctrl-C, and can put ranks on K simulated nodes (each
// with its own UTS, IPC and mount namespace, private /dev/shm and hostname sim-node-<i>).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim_nodes/node_network.hpp"

namespace tpcomm::cli {

struct LaunchOptions {
  int ranks = 2;
  int nodes = 1;
  std::optional<double> timeout_s;  // the whole job; then the ranks are stopped
  double grace_s = 3.0;             // between SIGTERM and SIGKILL
  bool keep_going = false;          // a failing rank does not stop the others
  bool prefix_output = true;        // "[rank] " before each line (tpcomm bench prints raw)
  // Rank r runs on a core of its own, or a hardware thread of its own when there are fewer cores
  // than ranks (bind_ranks, cpu_binding.hpp): no migrations, so shm latency stays steady. With
  // more ranks than hardware threads nothing is bound.
  bool bind_cores = false;
  // With bind_cores: each rank an equal share of the cores (team_launch.hpp), not one.
  bool core_shares = false;
  // --node-network, --link-rate, --link-loss (sim_nodes/node_network.hpp): with --nodes K, each
  // node's own network namespace, and the store, MASTER_ADDR and TPCOMM_SOCKET_ADDRESS on its
  // links.
  NodeNetworkOptions node_network;
  // The command is mpirun (mpirun_over_nodes.hpp): one process, in node 0's namespaces, that
  // starts the `ranks` on every node itself through `tpcomm node-agent`. Needs the node network.
  bool mpirun_over_nodes = false;
  std::vector<std::string> command;
};

// Returns the exit status for `tpcomm run`: 0 when every rank exited 0; the failing rank's exit
// status (128 + N for signal N) when one failed; 124 on --timeout; 130 on Ctrl-C; 2 for usage
// errors, such as --nodes without the right to create namespaces.
int launch(const LaunchOptions& options);

}  // namespace tpcomm::cli
