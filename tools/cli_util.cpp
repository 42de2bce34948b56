// Helpers shared by the tpcomm subcommands.
#include "cli_util.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::cli {

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

std::string format_bytes(std::uint64_t bytes) {
  constexpr std::uint64_t KiB = 1024;
  constexpr std::uint64_t MiB = KiB * 1024;
  constexpr std::uint64_t GiB = MiB * 1024;
  if (bytes >= GiB && bytes % GiB == 0) return fmt::format("{} GiB", bytes / GiB);
  if (bytes >= MiB && bytes % MiB == 0) return fmt::format("{} MiB", bytes / MiB);
  if (bytes >= KiB && bytes % KiB == 0) return fmt::format("{} KiB", bytes / KiB);
  return fmt::format("{} B", bytes);
}

std::string pad(std::string_view text, std::size_t width) {
  std::string out(text);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

}  // namespace tpcomm::cli
