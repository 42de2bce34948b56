// Helpers shared by the tpcomm subcommands.
#include "cli_util.hpp"

#include <unistd.h>

#include <fmt/format.h>

namespace tpcomm::cli {

std::string self_executable() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("tpcomm");
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

namespace {

std::string without_spaces(std::string text) {
  std::erase(text, ' ');
  return text;
}

}  // namespace

CLI::Option* add_size_option(CLI::App* cmd, const std::string& flags, std::uint64_t& target,
                             const std::string& help) {
  // CLI11's own parser; false: K is 1024 (as nccl-tests' -b/-e), not 1000.
  return cmd->add_option(flags, target, help + " (bytes; K, M, G: powers of 1024)")
      ->transform(CLI::AsSizeValue(false))
      ->default_str(without_spaces(format_bytes(target)));  // "4KiB": one word it accepts
}

std::string pad(std::string_view text, std::size_t width) {
  std::string out(text);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

}  // namespace tpcomm::cli
