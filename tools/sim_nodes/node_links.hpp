// The links between simulated hosts, shared by `tpcomm run --nodes` (node_network.hpp) and the
// tests' named namespaces (tests/support/net_namespaces.hpp): one address per node from
// 198.18.0.0/15 (the benchmarking range, never routed, never a private or public network), a
// bridge in a hub namespace of its own with one veth pair per node (so nothing touches the
// host's network), and the nftables and tc texts for cuts, loss and a link rate. Only text and
// argv are made here; each user runs them its own way (`ip -n NAME` for named namespaces,
// setns(2) into a process's namespace for the launcher's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpcomm::netlinks {

// Node i's address, 198.18.0.<i + 1>, on a /24 (so at most 250 nodes).
constexpr int kMaxNodes = 250;
constexpr int kPrefixLength = 24;
std::string node_address(int node);

// The first executable of /usr/sbin, /sbin, /usr/bin, /bin named `name`; "" when none.
std::string find_program(const std::string& name);

// One `ip` command (its arguments, without the program) and where it runs.
constexpr int kHub = -1;
struct IpStep {
  int where = kHub;  // kHub or a node index
  std::vector<std::string> args;
};

// The bridge br0 in the hub, then per node a veth pair: v<i> on the bridge in the hub, eth0 with
// node_address(i) in the node, loopback up. `node_refs[i]` names node i's namespace for
// `ip link ... netns`: a name under /run/netns or the pid of a process inside it.
std::vector<IpStep> bridge_steps(const std::vector<std::string>& node_refs);

// nft scripts (one argument to `nft`). Run in a namespace, drop_from drops every packet from
// `address` without telling the sender (a partitioned link: no reset, no "unreachable").
std::string drop_from_script(const std::string& table, const std::string& address);
std::string delete_table_script(const std::string& table);
// A partition of the node it runs in: every packet in or out of eth0 dropped, silently (no
// reset, no "unreachable"), as a failed switch port does; loopback is not touched.
std::string isolate_script(const std::string& table);
// Drops `percent` % of the packets that arrive on eth0, at random (nft numgen), in steps of
// 0.01 %; loopback is not touched.
std::string random_loss_script(double percent);

// "100mbit", "1gbit", "2.5Gbit", "500kbit", "1000000bit" -> bits per second; nullopt with `why`
// for anything else (tc's byte units such as "mbps" are refused: they read as bits too easily).
std::optional<std::uint64_t> parse_rate(const std::string& text, std::string* why);
// `tc qdisc replace` arguments (without the program) putting a token bucket of `bits_per_s` on
// `device`: a burst of 10 ms of the rate (at least 64 KiB, so GSO packets pass) and at most
// 50 ms of queue.
std::vector<std::string> rate_limit_args(const std::string& device, std::uint64_t bits_per_s);

}  // namespace tpcomm::netlinks
