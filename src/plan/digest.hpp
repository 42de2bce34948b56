// The plan digest: a hash of the plan's canonical JSON (sorted keys, integers only), so equal
// plans have equal digests on any machine, whatever the order of keys in the input files.
#pragma once

#include <string>
#include <string_view>

#include "tpcomm/plan.hpp"

namespace tpcomm::plan {

// FNV-1a, 64 bits: enough to tell plans apart for the agreement vote (not a security hash).
std::uint64_t fnv1a64(std::string_view bytes);

// 16 lower-case hex digits of fnv1a64(canonical plan without digest and provenance).
std::string plan_digest(const Plan& plan);

}  // namespace tpcomm::plan
