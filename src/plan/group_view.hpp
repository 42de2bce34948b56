// A read-only view of a facts table with what the admission rules ask of it: hosts, ranks per
// host, the lowest sm, and wording of rank sets for refusal reasons.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tpcomm/facts.hpp"

namespace tpcomm::plan {

// "0-3, 5, 8-15"
std::string format_rank_list(const std::vector<int>& ranks);

class GroupView {
 public:
  // Throws kInvalidInput for an empty table or mixed device types.
  explicit GroupView(const FactsTable& facts);

  int world_size() const { return static_cast<int>(facts_.ranks.size()); }
  int nodes() const { return static_cast<int>(hosts_.size()); }
  DeviceType type() const { return type_; }
  int min_sm() const { return min_sm_; }
  const RankFacts& rank(int r) const { return facts_.ranks[static_cast<std::size_t>(r)]; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  const std::vector<int>& ranks_on_host(std::size_t host) const { return ranks_by_host_[host]; }

  std::vector<int> ranks_where(const std::function<bool(const RankFacts&)>& pred) const;

  // Names ranks with their hosts: "ranks 8-15 on host node-b", "all 16 ranks (hosts a, b)".
  std::string describe(const std::vector<int>& ranks) const;
  // "node-a, node-b" (at most four, then "and N more").
  std::string host_list() const;

 private:
  const FactsTable& facts_;
  DeviceType type_ = DeviceType::kCpu;
  int min_sm_ = 0;
  std::vector<std::string> hosts_;  // in order of first appearance
  std::vector<std::vector<int>> ranks_by_host_;
};

}  // namespace tpcomm::plan
