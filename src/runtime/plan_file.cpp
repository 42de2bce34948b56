// plan_of_facts_file (plan_file.hpp).
#include "plan_file.hpp"

#include <fmt/format.h>

#include "common/text_file.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/facts_json.hpp"
#include "tpcomm/tuning_file.hpp"

namespace tpcomm::runtime {

FilePlan plan_of_facts_file(const std::string& path, Mode mode, const std::string& tuning,
                            std::string_view disable, std::string_view disable_source) {
  const std::string text = common::read_text_file(path, "facts file");
  FilePlan out;
  try {
    out.facts = decode_facts(text);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {} (the facts format is described in docs/facts.md)",
                                      path, e.what()));
  }
  PlanOptions options;
  options.mode = mode;
  for (Backend b : parse_disabled_backends(env_string("TPCOMM_DISABLE"), "TPCOMM_DISABLE")) {
    options.disabled[b] = "TPCOMM_DISABLE";
  }
  for (Backend b : parse_disabled_backends(disable, disable_source)) {
    options.disabled[b] = std::string(disable_source);
  }
  const Tuning overrides = tuning.empty() ? tuning_from_env() : read_tuning_file(tuning);
  out.plan = make_plan(out.facts, options, overrides);
  return out;
}

}  // namespace tpcomm::runtime
