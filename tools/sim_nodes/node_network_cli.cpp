// The node network's options (node_network_cli.hpp).
#include "node_network_cli.hpp"

#include "node_links.hpp"

namespace tpcomm::cli {

void add_node_network_options(CLI::App& cmd, NodeNetworkOptions& net, bool with_faults) {
  // A function option: nothing of this function's frame is left for CLI11 to write into later.
  cmd.add_option_function<std::string>(
         "--node-network",
         [&net](const std::string& m) {
           net.mode = m == "on"    ? NodeNetworkOptions::Mode::kOn
                      : m == "off" ? NodeNetworkOptions::Mode::kOff
                                   : NodeNetworkOptions::Mode::kAuto;
         },
         "with --nodes K: each node in a network namespace of its own, linked to the "
         "others over a bridge (198.18.0.<node + 1>); auto: when this process may (root, "
         "or CAP_SYS_ADMIN and CAP_NET_ADMIN), else it says why and the nodes share the "
         "host's network; on: refuse where it cannot")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->default_str("auto");
  cmd.add_option_function<std::string>(
      "--link-rate",
      [&net](const std::string& text) {
        std::string why;
        net.rate_bits = netlinks::parse_rate(text, &why);
        if (!net.rate_bits) throw CLI::ValidationError("--link-rate", why);
      },
      "each node's link rate, both ways (tc tbf), e.g. 100mbit, 10gbit; needs the node network");
  cmd.add_option_function<double>(
         "--link-loss", [&net](double percent) { net.loss_percent = percent; },
         "drop this percentage of the packets each node receives, at random (nftables); needs "
         "the node network")
      ->check(CLI::Range(0.0, 100.0));
  if (!with_faults) return;
  for (const auto kind : {LinkFault::Kind::kCut, LinkFault::Kind::kDown}) {
    cmd.add_option_function<std::vector<std::string>>(
           option_of(kind),
           [&net, kind](const std::vector<std::string>& texts) {
             for (const auto& text : texts) {
               std::string why;
               auto fault = parse_link_fault(text, kind, &why);
               if (!fault) throw CLI::ValidationError(option_of(kind), why);
               net.faults.push_back(*fault);
             }
           },
           kind == LinkFault::Kind::kCut
               ? "NODE@SECONDS: that many seconds after the ranks start, node NODE is cut off "
                 "(every "
                 "packet in and out of its link dropped, silently, as a failed switch port does; "
                 "nftables); repeatable; needs the node network"
               : "NODE@SECONDS: that many seconds after the ranks start, the bridge's end of node "
                 "NODE's link is set down (the cable pulled); repeatable; needs the node network")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
}

}  // namespace tpcomm::cli
