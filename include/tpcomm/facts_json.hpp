// JSON codec of facts files (version 1). Decoding validates everything and throws
// tpcomm::Error(kInvalidInput) with the field path, e.g.
//   ranks[3].device.sm: expected an integer, got the string "90"
#pragma once

#include <string>
#include <string_view>

#include "tpcomm/facts.hpp"

namespace tpcomm {

// Parses and validates a facts document; `repeat` entries are expanded.
FactsTable decode_facts(std::string_view json_text);

// Canonical JSON: runs of identical ranks (apart from a device index that grows by one) are
// folded back into `repeat` entries. decode_facts(encode_facts(t)) == t.
std::string encode_facts(const FactsTable& table, int indent = 2);

}  // namespace tpcomm
