// Simulated nodes for `tpcomm run --nodes K`: one holder process per node owns a new UTS, IPC
// and mount namespace (hostname sim-node-<i>, a private tmpfs on /dev/shm) and, with the node
// network, a network namespace linked to the others (node_network.hpp); ranks join the
// namespaces of their node's holder with setns(2) before exec. The holders die with the
// launcher (PR_SET_PDEATHSIG), and the namespaces with their last process.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "node_network.hpp"

namespace tpcomm::cli {

class SimulatedNodes {
 public:
  // Starts `count` holders (and, when `network` is given, one more for the hub and links them);
  // throws kInvalidInput (exit status 2) when the namespaces or links cannot be made.
  SimulatedNodes(int count, const NodeNetworkOptions* network);
  ~SimulatedNodes();
  SimulatedNodes(const SimulatedNodes&) = delete;
  SimulatedNodes& operator=(const SimulatedNodes&) = delete;

  // Paths of node i's namespace files, opened by a rank between fork and exec.
  const std::vector<std::string>& namespace_paths(int node) const {
    return paths_[static_cast<std::size_t>(node)];
  }
  // Null without the node network.
  const NodeNetwork* network() const { return network_.get(); }

 private:
  pid_t start_holder(int node, int flags);
  void stop_all();
  std::vector<pid_t> holders_;  // the nodes', then the hub's
  std::vector<std::vector<std::string>> paths_;
  std::unique_ptr<NodeNetwork> network_;
};

// The simulated nodes of `tpcomm run --nodes K` (null for one node), with the node network as
// `options.mode` asks: kAuto makes it when this process may, else says why on stderr in one line
// and goes on without; kOn refuses (kInvalidInput) where it cannot be made. Also refuses options
// that need it (a rate, loss) without it.
std::unique_ptr<SimulatedNodes> start_simulated_nodes(int count, const NodeNetworkOptions& options);

}  // namespace tpcomm::cli
