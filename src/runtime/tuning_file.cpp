// Tuning override files: read, decode, and errors that name the file.
#include "tpcomm/tuning_file.hpp"

#include <fmt/format.h>

#include "common/text_file.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {

Tuning read_tuning_file(const std::string& path, std::string_view what) {
  const std::string text = common::read_text_file(path, what);
  try {
    return decode_tuning(text, path);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} {}: {} (the tuning format is described in "
                                      "docs/tuning.md)",
                                      what, path, e.what()));
  }
}

Tuning tuning_from_env() {
  const std::string path = env_string("TPCOMM_TUNING");
  if (path.empty()) return {};
  return read_tuning_file(path, "tuning file (TPCOMM_TUNING)");
}

}  // namespace tpcomm
