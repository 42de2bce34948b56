// The network of simulated nodes (`tpcomm run --nodes K --node-network on|auto`): each node's
// holder process owns a network namespace of its own, joined to the others by veth pairs on a
// bridge in a hub namespace held by one more process (node_links.hpp: addresses 198.18.0.<i + 1>,
// nothing on the host's network). The namespaces are anonymous: they end with their last
// process, so a killed launcher (whose holders die with it, PR_SET_PDEATHSIG) leaves nothing,
// and the veth pairs and the bridge end with them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tpcomm::cli {

struct NodeNetworkOptions {
  enum class Mode { kAuto, kOn, kOff };
  Mode mode = Mode::kAuto;
  std::optional<std::uint64_t> rate_bits;  // each node's link, both directions (tc tbf)
  std::optional<double> loss_percent;      // of the packets each node receives (nftables)
};

// Why this process cannot make the node network with these options (no CAP_SYS_ADMIN and
// CAP_NET_ADMIN, no `ip`, no `tc` for a rate, no `nft` for loss); nullopt when it can.
std::optional<std::string> why_no_node_network(const NodeNetworkOptions& options);

class NodeNetwork {
 public:
  // Links the network namespaces of the processes `hub` and `nodes` (each already in its own);
  // throws kInvalidInput naming the command that failed and its output.
  NodeNetwork(pid_t hub, const std::vector<pid_t>& nodes, const NodeNetworkOptions& options);
  ~NodeNetwork();
  NodeNetwork(const NodeNetwork&) = delete;
  NodeNetwork& operator=(const NodeNetwork&) = delete;

  // Runs `fn` with the calling thread in node's network namespace: the sockets it makes (and the
  // threads it starts) live there. The thread is back in its own namespace afterwards.
  void in_node(int node, const std::function<void()>& fn) const;

 private:
  void run(int where, const std::string& program, const std::vector<std::string>& args) const;
  int hub_fd_ = -1;
  std::vector<int> node_fds_;
};

}  // namespace tpcomm::cli
