// The planner (docs/plan.md): a pure, deterministic function from a group's facts to the plan
// every rank follows — which backends each operation may use, why each other one was refused,
// and which backend/algorithm serves each message size.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tpcomm/facts.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm {

// One row of an operation's size table: a call of n bytes uses the first row with
// n <= max_bytes (nullopt: no limit, always the last row).
struct TableRow {
  std::optional<std::uint64_t> max_bytes;
  Backend backend = Backend::kNccl;
  Algorithm algorithm = Algorithm::kNccl;
  std::optional<int> blocks;  // CUDA kernels only: thread blocks per launch
  // shm only: bytes per protocol step, at most the lane (TPCOMM_SHM_WORKSPACE / 2); else a lane.
  std::optional<std::uint64_t> step_bytes;
#if __cplusplus >= 202002L  // defaulted comparison: C++20 (the library); C++17 users go without
  bool operator==(const TableRow&) const = default;
#endif
};

struct OpPlan {
  std::vector<Backend> eligible;            // in the fixed order of backends_of()
  std::map<Backend, std::string> rejected;  // backend -> why it was refused
  bool zero_copy = false;                   // user buffers may be registered, not copied
  std::string zero_copy_reason;             // why zero_copy is what it is
  std::vector<TableRow> table;

  // The row serving a call of `bytes` bytes.
  const TableRow& row_for(std::uint64_t bytes) const;
  bool is_eligible(Backend backend) const;
};

struct Plan {
  int world_size = 0;
  int nodes = 0;
  DeviceType device_type = DeviceType::kCpu;
  Mode mode = Mode::kEager;
  // Deterministic mode (PlanOptions::deterministic): every reduction sums in rank order 0..W-1
  // whatever its size, algorithm or backend (keeps_rank_order in tuning.hpp; the others reduce
  // gathered inputs). In the digest, so ranks that disagree are refused at set-up.
  bool deterministic = false;
  std::map<Op, OpPlan> ops;
  std::string tuning;  // which tuning entry served the tables (provenance; not in the digest)
  std::string digest;  // 16 hex digits (FNV-1a 64 of the canonical plan); equal on every rank
};

struct PlanOptions {
  Mode mode = Mode::kEager;
  bool deterministic = false;  // CommunicatorOptions::deterministic, TPCOMM_DETERMINISTIC
  // Backends never to use, each with who disabled it ("--disable", "TPCOMM_DISABLE"), which the
  // refusal reason names.
  std::map<Backend, std::string> disabled;
};

// Parses a comma list of backend names for PlanOptions::disabled. Unknown names, and the
// fallbacks nccl and gloo, are kInvalidInput errors. `source` names where the list came from.
std::set<Backend> parse_disabled_backends(std::string_view list, std::string_view source);

// Throws kInvalidInput for groups that cannot be planned (mixed device types).
// `overrides` may be empty: the built-in tables then serve every key.
Plan make_plan(const FactsTable& facts, const PlanOptions& options, const Tuning& overrides = {});

// Routing, in one place: the communicator dispatches every call by route_call, and
// Communicator::route (Python's route, the engines' gates) asks the same function.
//
// The bytes a call is routed by: the larger of its buffers (all_gather's and gather's output,
// size times the input; the input of the others: scatter's and all_to_all's whole input).
std::uint64_t routed_bytes(Op op, std::uint64_t input_bytes, int world_size);
// What an all_to_allv is routed by: its sizes differ from rank to rank, so the size table's last
// row, which every rank reads alike.
constexpr std::uint64_t kPerPeerRoutedBytes = ~std::uint64_t{0};
// The row that carries a call of `op` on `type` whose larger buffer holds `bytes`: the size
// table's row, with the backend that reduces `type` where the row's cannot (backend_for_type:
// integers on the floating-point-only GPU kernels go to NCCL, with its default algorithm and no
// block or step settings).
TableRow route_call(const Plan& plan, Op op, std::uint64_t bytes, DataType type);

// The plan JSON of docs/plan.md, "JSON" (keys sorted; canonical for a given plan).
std::string plan_to_json(const Plan& plan, int indent = 2);

}  // namespace tpcomm
