// The admission rules of docs/plan.md, "How it is decided": for each backend of the group's device
// type, eligible or refused with a reason that names the ranks, hosts and facts that decided it.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "group_view.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm::plan {

struct Admission {
  // nullopt: eligible; otherwise the refusal reason.
  std::map<Backend, std::optional<std::string>> verdicts;
  bool zero_copy = false;
  std::string zero_copy_reason;
};

Admission admit(const GroupView& group, const PlanOptions& options);

}  // namespace tpcomm::plan
