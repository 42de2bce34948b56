// Reading a whole text file (text_file.hpp).
#include "common/text_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::detail {

std::string read_text_file(const std::string& path, std::string_view what) {
  // Regular files only, checked before opening: a FIFO would block the open (and the rank), a
  // device such as /dev/zero would never end.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw invalid_input(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw invalid_input(fmt::format("cannot read {} {}: not a regular file", what, path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw invalid_input(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
  }
  std::string text(kMaxTextFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw invalid_input(fmt::format("cannot read {} {}: read error", what, path));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxTextFileBytes) {
    throw invalid_input(fmt::format("cannot read {} {}: larger than {} MiB, the most tpcomm reads",
                                    what, path, kMaxTextFileBytes >> 20));
  }
  return text;
}

}  // namespace tpcomm::detail
