// Reading a whole text file (text_file.hpp).
#include "common/text_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::detail {

std::string read_text_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw invalid_input(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw invalid_input(fmt::format("cannot read {} {}: read error", what, path));
  return text.str();
}

}  // namespace tpcomm::detail
