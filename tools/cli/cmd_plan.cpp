// tpcomm plan FILE: the plan of a facts file, as a table for people or as JSON (docs/plan.md).
#include <iostream>
#include <memory>

#include "cli_util.hpp"
#include "commands.hpp"
#include "plan/plan_text.hpp"
#include "runtime/plan_file.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm::cli {
namespace {

struct PlanArgs {
  std::string file;
  Mode mode = Mode::kEager;
  bool json = false;
  std::string tuning;
  std::string disable;
};

void run_plan(const PlanArgs& args) {
  const runtime::FilePlan p =
      runtime::plan_of_facts_file(args.file, args.mode, args.tuning, args.disable);
  std::cout << (args.json ? plan_to_json(p.plan) : plan::plan_text(p.facts, p.plan));
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
  cmd->add_flag("--json", args->json, "print the plan as JSON (docs/plan.md)");
  cmd->add_option("--tuning", args->tuning,
                  "tuning override file (docs/tuning.md); default: $TPCOMM_TUNING, else built-in");
  cmd->add_option("--disable", args->disable,
                  "comma list of backends never to use (added to $TPCOMM_DISABLE)");
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace tpcomm::cli
