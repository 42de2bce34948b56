// Rank set wording.
#include "common/rank_list.hpp"

#include <fmt/format.h>

namespace tpcomm::common {

std::string rank_ranges(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? fmt::format("{}", ranks[i])
                           : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string rank_set_text(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks));
}

}  // namespace tpcomm::common
