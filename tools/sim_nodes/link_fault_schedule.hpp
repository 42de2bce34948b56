// The link faults of `tpcomm run --link-cut / --link-down` (node_network.hpp), put on the node
// network as their time after the ranks' start comes, each announced on stderr with the
// wall-clock time, so that what the ranks report can be set against it.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "node_network.hpp"

namespace tpcomm::cli {

class LinkFaultSchedule {
 public:
  // `network` may be null (no faults were asked for: start_simulated_nodes refuses them there).
  LinkFaultSchedule(std::vector<LinkFault> faults, const NodeNetwork* network);

  // Puts every fault whose time has come (`since_start` after the ranks started); what failed,
  // if one could not be put (the group should be stopped: it would run without its fault).
  std::optional<std::string> apply_due(std::chrono::steady_clock::duration since_start);

 private:
  std::vector<LinkFault> faults_;  // by time
  const NodeNetwork* network_;
  std::size_t next_ = 0;
};

}  // namespace tpcomm::cli
