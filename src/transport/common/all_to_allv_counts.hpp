// all_to_allv's counts once every rank's are gathered (Gloo's all-gather, hier's): rank r's send
// counts, then its receive counts, 2 W values per rank. Every rank checks every pair, so a wrong
// count is the same kMismatch on every rank, before any data moves.
#pragma once

#include <cstddef>

#include <fmt/format.h>

#include "call_text.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport {

template <typename Count>
void check_all_to_allv_counts(const Count* all, std::size_t w, const Call& c) {
  for (std::size_t from = 0; from < w; ++from) {
    for (std::size_t to = 0; to < w; ++to) {
      const Count sends = all[from * 2 * w + to];
      const Count expects = all[to * 2 * w + w + from];
      if (sends != expects) {
        throw Error(ErrorCode::kMismatch,
                    fmt::format("all_to_allv counts do not match: rank {} sends {} elements to "
                                "rank {}, which expects {} from it ({} #{})",
                                from, sends, to, expects, call_signature(c), c.sequence));
      }
    }
  }
}

}  // namespace tpcomm::transport
