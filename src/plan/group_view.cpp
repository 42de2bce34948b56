// Group view: hosts, rank sets and their wording for refusal reasons.
#include "group_view.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/rank_list.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::plan {

std::string format_rank_list(const std::vector<int>& ranks) {
  return common::rank_ranges(ranks);
}

GroupView::GroupView(const FactsTable& facts) : facts_(facts) {
  if (facts.ranks.empty()) throw invalid_input("the group has no ranks");
  type_ = facts.ranks.front().device.type;
  std::vector<int> cuda;
  std::vector<int> cpu;
  for (int r = 0; r < world_size(); ++r) {
    const RankFacts& rf = rank(r);
    (rf.device.type == DeviceType::kCuda ? cuda : cpu).push_back(r);
    auto it = std::find(hosts_.begin(), hosts_.end(), rf.host);
    std::size_t h = static_cast<std::size_t>(it - hosts_.begin());
    if (it == hosts_.end()) {
      hosts_.push_back(rf.host);
      ranks_by_host_.emplace_back();
    }
    ranks_by_host_[h].push_back(r);
  }
  if (!cuda.empty() && !cpu.empty()) {
    throw invalid_input(fmt::format(
        "the group mixes device types (cuda: ranks {}; cpu: ranks {}): every rank of a group "
        "must be cuda, or every rank cpu",
        format_rank_list(cuda), format_rank_list(cpu)));
  }
  if (type_ == DeviceType::kCuda) {
    min_sm_ = *rank(0).device.sm;
    for (const auto& rf : facts.ranks) min_sm_ = std::min(min_sm_, *rf.device.sm);
  }
}

std::vector<int> GroupView::ranks_where(const std::function<bool(const RankFacts&)>& pred) const {
  std::vector<int> out;
  for (int r = 0; r < world_size(); ++r) {
    if (pred(rank(r))) out.push_back(r);
  }
  return out;
}

std::string GroupView::host_list() const {
  constexpr std::size_t kShown = 4;
  std::vector<std::string> shown(
      hosts_.begin(), hosts_.begin() + static_cast<long>(std::min(kShown, hosts_.size())));
  std::string text = fmt::format("{}", fmt::join(shown, ", "));
  if (hosts_.size() > kShown) text += fmt::format(" and {} more", hosts_.size() - kShown);
  return text;
}

std::string GroupView::describe(const std::vector<int>& ranks) const {
  if (static_cast<int>(ranks.size()) == world_size() && world_size() > 1) {
    // Across nodes the reasons' prefix already names the hosts.
    const std::string all =
        world_size() == 2 ? std::string("both ranks") : fmt::format("all {} ranks", world_size());
    if (nodes() > 1) return all;
    return fmt::format("{} on host {}", all, hosts_.front());
  }
  std::vector<std::string> parts;
  for (std::size_t h = 0; h < hosts_.size(); ++h) {
    std::vector<int> here;
    for (int r : ranks) {
      if (rank(r).host == hosts_[h]) here.push_back(r);
    }
    if (here.empty()) continue;
    parts.push_back(fmt::format("{} {} on host {}", here.size() == 1 ? "rank" : "ranks",
                                format_rank_list(here), hosts_[h]));
  }
  return fmt::format("{}", fmt::join(parts, " and "));
}

}  // namespace tpcomm::plan
