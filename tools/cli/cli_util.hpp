// Helpers shared by the tpcomm subcommands: sizes for humans, padding, enum options.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/human_text.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::cli {

// Sizes and columns as the plan's text writes them (common/human_text.hpp).
using common::format_bytes;
using common::pad;

// This program's own path (/proc/self/exe), for re-running it as ranks or sub-steps.
std::string self_executable();

// An option taking a byte count as nccl-tests writes it: 4096, 4K, 16M, 1G (K, M, G and KiB, MiB,
// GiB are powers of 1024, any case). The default shows in the help as format_bytes writes it,
// without the space ("4KiB").
CLI::Option* add_size_option(CLI::App* cmd, const std::string& flags, std::uint64_t& target,
                             const std::string& help);

// An option taking one of the names of a vocabulary enum (types.hpp), or of `allowed` when given.
template <typename E>
CLI::Option* add_enum_option(CLI::App* cmd, const std::string& flags, E& target,
                             const std::string& help, std::vector<E> allowed = {}) {
  std::vector<std::string> names;
  for (const auto& entry : Names<E>::table) {
    if (allowed.empty() || std::find(allowed.begin(), allowed.end(), entry.value) != allowed.end())
      names.emplace_back(entry.name);
  }
  return cmd
      ->add_option_function<std::string>(
          flags, [&target](const std::string& v) { target = *from_string<E>(v); }, help)
      ->check(CLI::IsMember(names))
      ->default_str(std::string(to_string(target)));
}

}  // namespace tpcomm::cli
