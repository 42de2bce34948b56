// Wording of rank sets in messages, one style everywhere: "0-3, 5" and "rank 5" / "ranks 0-3, 5".
#pragma once

#include <string>
#include <vector>

namespace tpcomm::common {

// Sorted ranks as ranges: {0,1,2,3,5} -> "0-3, 5".
std::string rank_ranges(const std::vector<int>& ranks);
// "rank 5" or "ranks 0-3, 5".
std::string rank_set_text(const std::vector<int>& ranks);

}  // namespace tpcomm::common
