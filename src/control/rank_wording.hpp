// Wording of rank sets in control-plane errors: "rank 3", "ranks 3, 5".
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

namespace tpcomm::detail {

inline std::string rank_list_text(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

}  // namespace tpcomm::detail
