// make_plan: admission, then a size table per operation from the tuning rows, then the digest.
#include <algorithm>

#include <fmt/format.h>

#include "admission.hpp"
#include "digest.hpp"
#include "group_view.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm {

const TableRow& OpPlan::row_for(std::uint64_t bytes) const {
  for (const auto& row : table) {
    if (!row.max_bytes || bytes <= *row.max_bytes) return row;
  }
  throw Error(ErrorCode::kInternal, "plan size table has no unbounded last row");
}

bool OpPlan::is_eligible(Backend backend) const {
  return std::find(eligible.begin(), eligible.end(), backend) != eligible.end();
}

std::set<Backend> parse_disabled_backends(std::string_view list, std::string_view source) {
  std::set<Backend> out;
  std::string item;
  auto flush = [&] {
    if (item.empty()) return;
    auto b = from_string<Backend>(item);
    if (!b) {
      throw invalid_input(fmt::format("{}: \"{}\" is not a backend (one of: {})", source, item,
                                      fmt::join(names_of<Backend>(), ", ")));
    }
    if (*b == Backend::kNccl || *b == Backend::kGloo) {
      throw invalid_input(fmt::format(
          "{}: {} cannot be disabled: it is the fallback engine that every group can use", source,
          item));
    }
    out.insert(*b);
    item.clear();
  };
  for (char c : list) {
    if (c == ',') {
      flush();
    } else if (c != ' ') {
      item.push_back(c);
    }
  }
  flush();
  return out;
}

namespace {

// Resolves each tuning row to its first eligible candidate and merges neighbours that resolve
// to the same choice (rows equal but for their size limit).
std::vector<TableRow> build_table(const std::vector<TuningRow>& rows, const OpPlan& op_plan,
                                  Backend fallback, Op op) {
  std::vector<TableRow> table;
  for (const auto& row : rows) {
    TableRow chosen{row.max_bytes, fallback, algorithms_of(fallback, op).front(), std::nullopt,
                    std::nullopt};
    for (const auto& c : row.use) {
      if (op_plan.is_eligible(c.backend)) {
        chosen = TableRow{row.max_bytes, c.backend, c.algorithm, c.blocks, c.step_bytes};
        break;
      }
    }
    TableRow widened = table.empty() ? TableRow{} : table.back();
    widened.max_bytes = chosen.max_bytes;
    if (!table.empty() && widened == chosen) {
      table.back().max_bytes = chosen.max_bytes;
    } else {
      table.push_back(std::move(chosen));
    }
  }
  if (table.empty() || table.back().max_bytes) {
    // Tuning rows always end unbounded (validated); keep the invariant even for odd input.
    table.push_back(
        {std::nullopt, fallback, algorithms_of(fallback, op).front(), std::nullopt, std::nullopt});
  }
  return table;
}

}  // namespace

Plan make_plan(const FactsTable& facts, const PlanOptions& options, const Tuning& overrides) {
  const plan::GroupView group(facts);
  const plan::Admission admission = plan::admit(group, options);
  const Backend fallback = fallback_backend(group.type());

  Plan plan;
  plan.world_size = group.world_size();
  plan.nodes = group.nodes();
  plan.device_type = group.type();
  plan.mode = options.mode;
  plan.deterministic = options.deterministic;

  std::vector<std::string> provenance;
  for (Op op : kAllOps) {
    OpPlan& p = plan.ops[op];
    for (Backend b : backends_of(group.type())) {
      const auto& admitted = admission.verdicts.at(b);
      std::optional<std::string> v = admitted ? admitted : why_not_serving(b, op);
      if (!v && options.deterministic && b == Backend::kMultimem &&
          (reduces(op) || op == Op::kAllReduceRmsNorm)) {
        v = "deterministic mode: the switch's reductions do not keep rank order";
      }
      if (v) {
        p.rejected[b] = *v;
      } else {
        p.eligible.push_back(b);
      }
    }
    // Zero-copy is the custom kernels' registration: an op they do not serve has none.
    // all_reduce_rmsnorm's kernels copy their rows into the workspace.
    const bool copies = op == Op::kAllReduceRmsNorm;
    p.zero_copy = admission.zero_copy && !copies &&
                  (group.type() != DeviceType::kCuda || !why_not_serving(Backend::kCustom, op));
    p.zero_copy_reason =
        !admission.zero_copy || p.zero_copy ? admission.zero_copy_reason
        : copies                            ? std::string(
                                                  "all_reduce_rmsnorm copies its rows into the workspace: nothing is "
                                                                             "read in place")
                 : fmt::format("nccl carries {}: nothing is registered", to_string(op));
    if (group.world_size() == 1) {
      Backend b = p.is_eligible(Backend::kLocal) ? Backend::kLocal : fallback;
      p.table = {{std::nullopt, b, algorithms_of(b, op).front(), std::nullopt, std::nullopt}};
      continue;
    }
    TuningLookup lookup =
        find_tuning(overrides, group.type(), group.min_sm(), group.world_size(), options.mode, op);
    // The built-in graph thresholds are larger because registered buffers skip the copy; a group
    // without zero-copy copies in graphs too, so it plans its graph table from the eager rows (an
    // override file's own graph rows still apply).
    if (options.mode == Mode::kGraph && !p.zero_copy && lookup.rows != nullptr &&
        lookup.rows ==
            find_tuning({}, group.type(), group.min_sm(), group.world_size(), Mode::kGraph, op)
                .rows) {
      lookup = find_tuning(overrides, group.type(), group.min_sm(), group.world_size(),
                           Mode::kEager, op);
      lookup.description += " (eager rows: no zero-copy)";
    }
    static const std::vector<TuningRow> kNoRows;
    p.table = build_table(lookup.rows ? *lookup.rows : kNoRows, p, fallback, op);
    if (std::find(provenance.begin(), provenance.end(), lookup.description) == provenance.end()) {
      provenance.push_back(lookup.description);
    }
  }
  plan.tuning = provenance.empty() ? std::string("none (world size 1)")
                                   : fmt::format("{}", fmt::join(provenance, "; "));
  plan.digest = plan::plan_digest(plan);
  return plan;
}

}  // namespace tpcomm
