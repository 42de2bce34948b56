// The plan of a group described by a facts file, made as `tpcomm plan` makes it; Python's
// tpcomm.plan_file uses the same.
#pragma once

#include <string>
#include <string_view>

#include "tpcomm/facts.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm::runtime {

struct FilePlan {
  FactsTable facts;
  Plan plan;
};

// `tuning`: a tuning file, or empty for TPCOMM_TUNING (else built-in). Backends in TPCOMM_DISABLE
// and in `disable` (named `disable_source` in the plan's refusals) are refused. Decode errors
// name the file.
FilePlan plan_of_facts_file(const std::string& path, Mode mode, const std::string& tuning,
                            std::string_view disable = {},
                            std::string_view disable_source = "--disable");

}  // namespace tpcomm::runtime
