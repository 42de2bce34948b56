// The human form of a plan: what an operator reads before a long launch.
#pragma once

#include <string>

#include "tpcomm/facts.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm::cli {

std::string format_plan_report(const FactsTable& facts, const Plan& plan);

}  // namespace tpcomm::cli
