// Node identity: two ranks share a node when their boot ids match *and* each can open the
// shared-memory segment the other created — a probe, not a hostname comparison, so simulated
// nodes (private /dev/shm and IPC namespaces on one kernel) and containers come out right.
#pragma once

#include <string>
#include <vector>

namespace tpcomm::runtime {

// A small /dev/shm segment holding a random token; unlinked on destruction.
class NodeProbeSegment {
 public:
  NodeProbeSegment();
  ~NodeProbeSegment();
  NodeProbeSegment(const NodeProbeSegment&) = delete;
  NodeProbeSegment& operator=(const NodeProbeSegment&) = delete;
  const std::string& name() const { return name_; }
  const std::string& token() const { return token_; }
  // Unlinks now (idempotent).
  void remove();

 private:
  std::string name_;
  std::string token_;
  bool linked_ = false;
};

// Whether the segment `name` exists here and holds `token`.
bool can_see_segment(const std::string& name, const std::string& token);

// Node index of every rank (0, 1, ... in order of each node's lowest rank) from the symmetric
// "sees" matrix: sees[i][j] and sees[j][i] put i and j on one node.
std::vector<int> group_nodes(const std::vector<std::vector<bool>>& sees);

}  // namespace tpcomm::runtime
