// Reading tuning override files (docs/tuning.md) from disk: the plan layer only decodes text.
#pragma once

#include <string>
#include <string_view>

#include "tpcomm/tuning.hpp"

namespace tpcomm {

// Reads and decodes the tuning file at `path`; `what` names where the path came from in errors
// ("tuning file (TPCOMM_TUNING)"). Throws kInvalidInput naming the file, and the field for a
// malformed one.
Tuning read_tuning_file(const std::string& path, std::string_view what = "tuning file");

// The overrides TPCOMM_TUNING names, or none (built-in tables only) when it is unset or empty.
Tuning tuning_from_env();

}  // namespace tpcomm
