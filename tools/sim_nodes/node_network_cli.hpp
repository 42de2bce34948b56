// The options of the simulated nodes' network, shared by `tpcomm run` and `tpcomm bench`.
#pragma once

#include <CLI/CLI.hpp>

#include "node_network.hpp"

namespace tpcomm::cli {

// --node-network, --link-rate, --link-loss and, `with_faults`, --link-cut and --link-down
// (node_network.hpp), checked when parsed.
void add_node_network_options(CLI::App& cmd, NodeNetworkOptions& net, bool with_faults);

}  // namespace tpcomm::cli
