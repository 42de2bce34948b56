// tpcomm plan FILE: the plan of a facts file, as a table for people or as JSON (DESIGN.md §2).
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "commands.hpp"
#include "common/text_file.hpp"
#include "plan_report.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/facts_json.hpp"
#include "tpcomm/plan.hpp"
#include "tpcomm/tuning_file.hpp"

namespace tpcomm::cli {
namespace {

struct PlanArgs {
  std::string file;
  Mode mode = Mode::kEager;
  bool json = false;
  std::string tuning;
  std::string disable;
};

// Prefixes a decode error with the file it came from, keeping the error's code.
template <typename Fn>
auto with_file_context(const std::string& path, std::string_view hint, Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {} ({})", path, e.what(), hint));
  }
}

void run_plan(const PlanArgs& args) {
  const std::string text = detail::read_text_file(args.file, "facts file");
  FactsTable facts = with_file_context(args.file, "the facts format is described in docs/facts.md",
                                       [&] { return decode_facts(text); });
  PlanOptions options;
  options.mode = args.mode;
  for (Backend b : parse_disabled_backends(env_string("TPCOMM_DISABLE"), "TPCOMM_DISABLE")) {
    options.disabled[b] = "TPCOMM_DISABLE";
  }
  for (Backend b : parse_disabled_backends(args.disable, "--disable")) {
    options.disabled[b] = "--disable";
  }
  const Tuning overrides = args.tuning.empty() ? tuning_from_env() : read_tuning_file(args.tuning);
  Plan plan = make_plan(facts, options, overrides);
  std::cout << (args.json ? plan_to_json(plan) : format_plan_report(facts, plan));
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Print the plan of a group described by a facts file: the backend and algorithm "
      "for each operation and message size, and why every other backend was refused");
  cmd->add_option("FILE", args->file, "facts file (JSON, docs/facts.md)")->required();
  add_enum_option(cmd, "--mode", args->mode, "eager, or graph for calls captured in CUDA graphs");
  cmd->add_flag("--json", args->json, "print the plan as JSON (DESIGN.md §2)");
  cmd->add_option("--tuning", args->tuning,
                  "tuning override file (docs/tuning.md); default: $TPCOMM_TUNING, else built-in");
  cmd->add_option("--disable", args->disable,
                  "comma list of backends never to use (added to $TPCOMM_DISABLE)");
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace tpcomm::cli
