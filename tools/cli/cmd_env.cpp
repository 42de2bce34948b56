// tpcomm env: every environment variable tpcomm reads, with its value and meaning.
#include <iostream>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "commands.hpp"
#include "runtime/fault_injection.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::cli {
namespace {

// A value whose syntax only the layer that reads it knows (the env registry checks kinds).
std::string syntax_problem(const EnvVar& v, const std::string& raw) {
  if (v.name != "TPCOMM_FAULT") return "";
  try {
    runtime::parse_faults(raw);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

int run_env() {
  int invalid = 0;
  std::size_t width = 0;
  for (const auto& v : env_registry()) width = std::max(width, v.name.size());
  bool launch_header = false;
  std::cout << "tpcomm settings:\n";
  for (const auto& v : env_registry()) {
    if (v.launch && !launch_header) {
      std::cout << "\nlaunch environment (set by torchrun, mpirun or tpcomm run):\n";
      launch_header = true;
    }
    auto raw = env_raw(v.name);
    std::string value;
    if (raw) {
      std::string problem = env_value_problem(v, *raw);
      if (problem.empty()) problem = syntax_problem(v, *raw);
      const std::string shown = v.secret ? "(set, not shown)" : *raw;
      value = problem.empty() ? shown : fmt::format("{}  INVALID: {}", shown, problem);
      invalid += !problem.empty();
    } else {
      value = v.default_value.empty() ? "(unset)" : fmt::format("(unset: {})", v.default_value);
    }
    std::cout << fmt::format("  {}  {}\n  {}    {}\n", pad(v.name, width), value, pad("", width),
                             v.meaning);
  }
  if (invalid > 0) {
    std::cerr << fmt::format("tpcomm env: {} variable{} with an invalid value (marked INVALID)\n",
                             invalid, invalid == 1 ? "" : "s");
    return 2;
  }
  return 0;
}

}  // namespace

void add_env_command(CLI::App& app, int& exit_status) {
  CLI::App* cmd = app.add_subcommand(
      "env", "List every environment variable tpcomm reads, its current value and meaning");
  cmd->callback([&exit_status] { exit_status = run_env(); });
}

}  // namespace tpcomm::cli
