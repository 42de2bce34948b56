// The worker's integer checks (part of `correctness`): int32 sums that wrap, int64 max and min,
// uint8 sums that wrap, an int32 reduce-scatter and an int64 all-gather, each element against a
// reference computed here in unsigned (modular) arithmetic, independently of tpcomm.
#pragma once

#include <cstdint>
#include <vector>

#include "tpcomm/tpcomm.hpp"

namespace tpcomm::test {

// Runs the calls; returns how many checks failed (printing the first few), adds the results'
// hashes to `hashes` and the number of checks to `*checks`.
int check_integer_calls(Communicator& comm, std::vector<std::uint64_t>& hashes, int* checks);

}  // namespace tpcomm::test
