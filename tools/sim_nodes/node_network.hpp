// The network of simulated nodes (`tpcomm run --nodes K --node-network on|auto`): each node's
// holder process owns a network namespace of its own, joined to the others by veth pairs on a
// bridge in a hub namespace held by one more process (node_links.hpp: addresses 198.18.0.<i + 1>,
// nothing on the host's network). The namespaces are anonymous: they end with their last
// process, so a killed launcher (whose holders die with it, PR_SET_PDEATHSIG) leaves nothing,
// and the veth pairs and the bridge end with them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tpcomm::cli {

// A fault put on one node's link at a time after the ranks were started (--link-cut,
// --link-down): a test's or a user's way to see what a group does when a host is lost.
struct LinkFault {
  enum class Kind {
    kCut,   // a partition: every packet in and out of the node's eth0 dropped (nftables)
    kDown,  // the cable pulled at the switch: the bridge's end of the node's veth set down
  };
  Kind kind = Kind::kCut;
  int node = 0;
  std::chrono::milliseconds after{0};
};
// "NODE@SECONDS" (e.g. "1@2.5") -> the fault; nullopt with `why` for anything else.
std::optional<LinkFault> parse_link_fault(const std::string& text, LinkFault::Kind kind,
                                          std::string* why);
// "--link-cut" or "--link-down", and what the fault does, for messages.
const char* option_of(LinkFault::Kind kind);
const char* effect_of(LinkFault::Kind kind);

struct NodeNetworkOptions {
  enum class Mode { kAuto, kOn, kOff };
  Mode mode = Mode::kAuto;
  std::optional<std::uint64_t> rate_bits;  // each node's link, both directions (tc tbf)
  std::optional<double> loss_percent;      // of the packets each node receives (nftables)
  std::vector<LinkFault> faults;           // in the order given
};

// Why this process cannot make the node network with these options (no CAP_SYS_ADMIN and
// CAP_NET_ADMIN, no `ip`, no `tc` for a rate, no `nft` for loss or a cut); nullopt when it can.
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

  // Puts `fault` on its node's link now; throws kInvalidInput naming the command that failed.
  void apply(const LinkFault& fault) const;

 private:
  void run(int where, const std::string& program, const std::vector<std::string>& args) const;
  int hub_fd_ = -1;
  std::vector<int> node_fds_;
};

}  // namespace tpcomm::cli
