// Fault injection for tests and debugging (TPCOMM_FAULT): make a named step fail, stall or
// corrupt its message on a chosen rank. Syntax: comma list of STEP:ACTION@RANK[#SEQUENCE], e.g.
//   TPCOMM_FAULT=facts:corrupt@1         rank 1 sends a corrupt facts record
//   TPCOMM_FAULT=digest:corrupt@2        rank 2 announces a different plan digest
//   TPCOMM_FAULT=gloo.connect:fail@1     set-up step gloo.connect fails on rank 1
//   TPCOMM_FAULT=call:stall@0#5          rank 0 stalls in its 5th call
//   TPCOMM_FAULT=call:oom@1#2            rank 1's 2nd call throws std::bad_alloc
// Steps: facts, node_probe, digest, any set-up step name, call. Actions: fail, stall, corrupt,
// oom (a std::bad_alloc, not a tpcomm::Error: what a failed allocation in a backend throws).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpcomm::runtime {

enum class FaultAction { kFail, kStall, kCorrupt, kOutOfMemory };

struct Fault {
  std::string step;
  FaultAction action = FaultAction::kFail;
  int rank = 0;
  std::int64_t sequence = -1;  // calls only; -1: every call
};

// Parses TPCOMM_FAULT (kInvalidInput with the offending item on bad syntax).
std::vector<Fault> parse_faults(std::string_view text);

class FaultPlan {
 public:
  FaultPlan() = default;
  FaultPlan(std::vector<Fault> faults, int rank) : faults_(std::move(faults)), rank_(rank) {}
  static FaultPlan from_env(int rank);

  bool hits(std::string_view step, FaultAction action, std::int64_t sequence = -1) const;
  // Throws kUnavailable "injected fault" when `fail` is set for this step, std::bad_alloc when
  // `oom` is; sleeps (until the
  // process is killed, at most an hour) when `stall` is.
  void apply_fail_or_stall(std::string_view step, std::int64_t sequence = -1) const;

 private:
  std::vector<Fault> faults_;
  int rank_ = 0;
};

}  // namespace tpcomm::runtime
