// The plan as text: a header, an aligned size table per operation, then every refusal with its
// reason (plan_text.hpp).
#include "plan_text.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "common/human_text.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm::plan {
namespace {

using common::format_bytes;
using common::pad;

std::string group_line(const FactsTable& facts, const Plan& plan) {
  std::vector<std::string> hosts;
  for (const auto& r : facts.ranks) {
    if (std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
  }
  std::string shown = fmt::format(
      "{}", fmt::join(hosts.begin(),
                      hosts.begin() + std::min<long>(4, static_cast<long>(hosts.size())), ", "));
  if (hosts.size() > 4) shown += fmt::format(" and {} more", hosts.size() - 4);
  std::string text =
      fmt::format("{} {} rank{} on {} node{} ({})", plan.world_size, to_string(plan.device_type),
                  plan.world_size == 1 ? "" : "s", plan.nodes, plan.nodes == 1 ? "" : "s", shown);
  if (plan.device_type == DeviceType::kCuda) {
    int lo = *facts.ranks.front().device.sm;
    int hi = lo;
    for (const auto& r : facts.ranks) {
      lo = std::min(lo, *r.device.sm);
      hi = std::max(hi, *r.device.sm);
    }
    text += lo == hi ? fmt::format(", sm {}", lo) : fmt::format(", sm {}-{}", lo, hi);
  }
  return text;
}

std::string size_range(const std::vector<TableRow>& table, std::size_t i) {
  const auto& row = table[i];
  if (table.size() == 1) return "any size";
  if (i == 0) return "up to " + format_bytes(*row.max_bytes);
  const std::string from = format_bytes(*table[i - 1].max_bytes);
  if (!row.max_bytes) return "above " + from;
  return fmt::format("{} .. {}", from, format_bytes(*row.max_bytes));
}

// all_reduce_rmsnorm: which of its table's backends fuse the add+norm into the all-reduce, and
// which all-reduce in float32 first, then add and normalise on each rank.
void append_fusion(std::string& out, const OpPlan& p) {
  std::vector<std::string_view> fused;
  std::vector<std::string_view> unfused;
  for (const auto& row : p.table) {
    auto& side = fuses_rmsnorm(row.backend) ? fused : unfused;
    if (std::find(side.begin(), side.end(), to_string(row.backend)) == side.end()) {
      side.push_back(to_string(row.backend));
    }
  }
  if (!fused.empty()) out += fmt::format("  fused in the all-reduce: {}\n", fmt::join(fused, ", "));
  if (!unfused.empty()) {
    out += fmt::format("  unfused (a float32 all-reduce, then add+norm on each rank): {}\n",
                       fmt::join(unfused, ", "));
  }
}

void append_op(std::string& out, Op op, const OpPlan& p) {
  std::vector<std::string_view> eligible;
  for (Backend b : p.eligible) eligible.push_back(to_string(b));
  out += fmt::format("\n{}  (eligible: {}; zero-copy: {})\n", to_string(op),
                     fmt::join(eligible, ", "), p.zero_copy ? "yes" : "no");
  std::vector<std::string> ranges;
  std::size_t width = 4;
  for (std::size_t i = 0; i < p.table.size(); ++i) {
    ranges.push_back(size_range(p.table, i));
    width = std::max(width, ranges.back().size());
  }
  out += fmt::format("  {}  {}  {}  {}\n", pad("size", width), pad("backend", 9),
                     pad("algorithm", 12), "blocks/step");
  for (std::size_t i = 0; i < p.table.size(); ++i) {
    const auto& row = p.table[i];
    out += fmt::format("  {}  {}  {}  {}\n", pad(ranges[i], width), pad(to_string(row.backend), 9),
                       pad(to_string(row.algorithm), 12),
                       row.blocks       ? fmt::format("{}", *row.blocks)
                       : row.step_bytes ? format_bytes(*row.step_bytes)
                                        : "-");
  }
  if (op == Op::kAllReduceRmsNorm) append_fusion(out, p);
}

void append_refusals(std::string& out, const Plan& plan) {
  // Reasons usually do not depend on the operation: print such a refusal once.
  std::vector<Backend> order;
  for (const auto& [op, p] : plan.ops) {
    for (const auto& [b, reason] : p.rejected) {
      if (std::find(order.begin(), order.end(), b) == order.end()) order.push_back(b);
    }
  }
  std::sort(order.begin(), order.end());
  if (order.empty()) {
    out += "\nrefused: none\n";
    return;
  }
  out += "\nrefused:\n";
  for (Backend b : order) {
    std::vector<std::pair<Op, std::string>> reasons;
    for (const auto& [op, p] : plan.ops) {
      if (auto it = p.rejected.find(b); it != p.rejected.end())
        reasons.emplace_back(op, it->second);
    }
    const bool same = reasons.size() == plan.ops.size() &&
                      std::all_of(reasons.begin(), reasons.end(), [&](const auto& r) {
                        return r.second == reasons.front().second;
                      });
    if (same) {
      out += fmt::format("  {}  {}\n", pad(to_string(b), 9), reasons.front().second);
      continue;
    }
    // One line per reason, naming the ops it refuses, in the order they first appear.
    std::vector<std::pair<std::string, std::vector<std::string_view>>> by_reason;
    for (const auto& refusal : reasons) {
      const std::string& why = refusal.second;
      auto it = std::find_if(by_reason.begin(), by_reason.end(),
                             [&](const auto& r) { return r.first == why; });
      if (it == by_reason.end()) it = by_reason.insert(by_reason.end(), {why, {}});
      it->second.push_back(to_string(refusal.first));
    }
    for (const auto& [reason, ops] : by_reason) {
      out += fmt::format("  {}  {}: {}\n", pad(to_string(b), 9), fmt::join(ops, ", "), reason);
    }
  }
}

// ", deterministic: ..." for a plan in deterministic mode: the backends of its reduction tables
// that reduce gathered inputs here instead of their own way.
std::string deterministic_text(const Plan& plan) {
  if (!plan.deterministic) return "";
  std::vector<std::string_view> gathered;
  for (const auto& [op, p] : plan.ops) {
    if (!reduces(op) && op != Op::kAllReduceRmsNorm) continue;
    for (const auto& row : p.table) {
      const auto name = to_string(row.backend);
      if (!keeps_rank_order(row.backend) &&
          std::find(gathered.begin(), gathered.end(), name) == gathered.end()) {
        gathered.push_back(name);
      }
    }
  }
  std::string text = ", deterministic (every reduction sums in rank order 0..W-1";
  if (!gathered.empty()) {
    text +=
        fmt::format("; on {} by gathering the inputs and summing here", fmt::join(gathered, ", "));
  }
  return text + ")";
}

}  // namespace

std::string plan_text(const FactsTable& facts, const Plan& plan) {
  std::string out;
  out += fmt::format("group   {}\n", group_line(facts, plan));
  out += fmt::format("mode    {}{}\n", to_string(plan.mode), deterministic_text(plan));
  out += fmt::format("tuning  {}\n", plan.tuning);
  out += fmt::format("digest  {}\n", plan.digest);
  for (const auto& [op, p] : plan.ops) append_op(out, op, p);
  append_refusals(out, plan);
  const auto& ar = plan.ops.at(Op::kAllReduce);
  out += fmt::format("\nzero-copy: {}\n", ar.zero_copy_reason);
  return out;
}

}  // namespace tpcomm::plan
