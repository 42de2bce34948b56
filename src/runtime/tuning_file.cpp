// Tuning override files: read, decode, and errors that name the file.
#include "tpcomm/tuning_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {

Tuning read_tuning_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw invalid_input(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw invalid_input(fmt::format("cannot read {} {}: read error", what, path));
  try {
    return decode_tuning(text.str(), path);
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
