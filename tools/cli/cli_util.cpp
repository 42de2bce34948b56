// Helpers shared by the tpcomm subcommands.
#include "cli_util.hpp"

#include <unistd.h>

namespace tpcomm::cli {

std::string self_executable() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("tpcomm");
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

}  // namespace tpcomm::cli
