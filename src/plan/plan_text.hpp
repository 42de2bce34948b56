// The human form of a plan: what an operator reads before a long launch (`tpcomm plan`,
// Python's Communicator.plan_text). Pure: it returns the text, its callers print it.
#pragma once

#include <string>

#include "tpcomm/facts.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm::plan {

// A header (group, mode, tuning, digest), an aligned size table per operation, then every
// refusal with its reason and why all-reduce is or is not zero-copy.
std::string plan_text(const FactsTable& facts, const Plan& plan);

}  // namespace tpcomm::plan
