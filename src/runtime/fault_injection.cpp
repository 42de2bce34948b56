// TPCOMM_FAULT parsing and matching.
#include "fault_injection.hpp"

#include <algorithm>
#include <charconv>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::runtime {
namespace {

bool parse_int(std::string_view s, std::int64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

}  // namespace

std::vector<Fault> parse_faults(std::string_view text) {
  std::vector<Fault> out;
  for (const auto& item : split_list(text)) {
    auto bad = [&](const char* why) {
      return invalid_input(
          fmt::format("TPCOMM_FAULT item \"{}\": {} (expected "
                      "STEP:fail|stall|corrupt|oom@RANK[#SEQUENCE])",
                      item, why));
    };
    auto colon = item.find(':');
    auto at = item.find('@');
    if (colon == std::string::npos || at == std::string::npos || at < colon) throw bad("malformed");
    Fault f;
    f.step = item.substr(0, colon);
    std::string action = item.substr(colon + 1, at - colon - 1);
    if (action == "fail") {
      f.action = FaultAction::kFail;
    } else if (action == "stall") {
      f.action = FaultAction::kStall;
    } else if (action == "corrupt") {
      f.action = FaultAction::kCorrupt;
    } else if (action == "oom") {
      f.action = FaultAction::kOutOfMemory;
    } else {
      throw bad("unknown action");
    }
    std::string rest = item.substr(at + 1);
    auto hash = rest.find('#');
    std::int64_t rank = 0;
    if (!parse_int(std::string_view(rest).substr(0, hash), rank))
      throw bad("rank is not an integer");
    f.rank = static_cast<int>(rank);
    if (hash != std::string::npos &&
        !parse_int(std::string_view(rest).substr(hash + 1), f.sequence)) {
      throw bad("sequence is not an integer");
    }
    out.push_back(f);
  }
  return out;
}

FaultPlan FaultPlan::from_env(int rank) {
  auto text = env_raw("TPCOMM_FAULT");
  if (!text) return FaultPlan();
  TPCOMM_LOG(kWarn, "fault", "rank {}: fault injection active: TPCOMM_FAULT={}", rank, *text);
  return FaultPlan(parse_faults(*text), rank);
}

bool FaultPlan::hits(std::string_view step, FaultAction action, std::int64_t sequence) const {
  return std::ranges::any_of(faults_, [&](const auto& f) {
    return f.rank == rank_ && f.step == step && f.action == action &&
           (f.sequence < 0 || f.sequence == sequence);
  });
  return false;
}

void FaultPlan::apply_fail_or_stall(std::string_view step, std::int64_t sequence) const {
  if (hits(step, FaultAction::kFail, sequence)) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("injected fault: {} fails on rank {} (TPCOMM_FAULT)", step, rank_));
  }
  if (hits(step, FaultAction::kOutOfMemory, sequence)) {
    // Not a tpcomm::Error: what an allocation inside a backend throws (docs/errors.md).
    throw std::bad_alloc();
  }
  if (hits(step, FaultAction::kStall, sequence)) {
    TPCOMM_LOG(kWarn, "fault", "rank {}: stalling in {} (TPCOMM_FAULT)", rank_, step);
    std::this_thread::sleep_for(std::chrono::hours(1));
  }
}

}  // namespace tpcomm::runtime
