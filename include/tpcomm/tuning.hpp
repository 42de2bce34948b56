// Tuning tables: for each (device type, sm, world size, mode) and operation, the size ranges and
// the backends to try for each, in order of preference. The planner picks, per range, the first
// eligible candidate. Built-in tables ship with tpcomm; a JSON file (docs/tuning.md) overrides
// them key by key.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpcomm/facts.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm {

// The backends a group of this device type chooses between, in a fixed order.
const std::vector<Backend>& backends_of(DeviceType type);
// The engine that is always eligible: nccl for cuda, gloo for cpu.
Backend fallback_backend(DeviceType type);
// Algorithms a backend implements for an operation (the first is its default).
const std::vector<Algorithm>& algorithms_of(Backend backend, Op op);
// The backend that carries a call of `type` where a plan names `planned`, when `planned` cannot:
// the custom and multimem kernels reduce floating-point types only, so integer calls on a CUDA
// communicator go to NCCL (as vLLM's and SGLang's custom all-reduce leave them to NCCL).
std::optional<Backend> backend_for_type(Backend planned, DataType type);
// Why `backend` cannot carry `op` at all, whatever the group (the plan's refusal for that op), or
// nullopt where it implements it.
std::optional<std::string> why_not_serving(Backend backend, Op op);
// Whether the backend has the forms with per-peer or per-rank counts (all_to_allv,
// all_gatherv, reduce_scatterv); the dispatch gives them to the fallback where the row's has not.
bool takes_counts(Backend backend);
// Whether the backend's kernels take a thread-block count (CUDA kernels of our own).
bool takes_blocks(Backend backend);
// Whether the backend streams a message in steps of a size the table may set (shm's lanes).
bool takes_step(Backend backend);
// Whether the backend fuses all_reduce_rmsnorm's residual add and RMSNorm into its own
// all-reduce (one pass over the summed rows). The others carry it unfused: a float32 all-reduce
// of the input, then the add+norm kernel on each rank (plan text and docs/communicator.md say so).
bool fuses_rmsnorm(Backend backend);
// Whether the backend's reductions sum every element in rank order 0..W-1 (16-bit types in fp32,
// rounded once) at every size and algorithm: shm, local and the custom kernels. Gloo's ring,
// hier's per-node partial sums, NCCL and multimem do not; in deterministic mode the dispatch
// gathers the inputs through them and reduces here in rank order (docs/communicator.md).
bool keeps_rank_order(Backend backend);
// The step sizes a table may set: a multiple of 64 bytes within these bounds.
constexpr std::uint64_t kMinStepBytes = 4096;
constexpr std::uint64_t kMaxStepBytes = std::uint64_t{1} << 30;

struct Candidate {
  Backend backend = Backend::kNccl;
  Algorithm algorithm = Algorithm::kNccl;
  std::optional<int> blocks;
  std::optional<std::uint64_t> step_bytes;  // shm only: bytes per protocol step (else its lane)
#if __cplusplus >= 202002L  // defaulted comparison: C++20 (the library); C++17 users go without
  bool operator==(const Candidate&) const = default;
#endif
};

struct TuningRow {
  std::optional<std::uint64_t> max_bytes;  // nullopt: no upper bound (last row)
  std::vector<Candidate> use;              // preference order
#if __cplusplus >= 202002L  // defaulted comparison: C++20 (the library); C++17 users go without
  bool operator==(const TuningRow&) const = default;
#endif
};

struct TuningKey {
  DeviceType device = DeviceType::kCuda;
  std::optional<int> sm;  // cuda only: the table serves groups whose lowest sm is >= this
  int world_size = 2;
  std::optional<Mode> mode;  // nullopt: both modes
#if __cplusplus >= 202002L   // defaulted comparison: C++20 (the library); C++17 users go without
  bool operator==(const TuningKey&) const = default;
#endif
};

struct TuningEntry {
  TuningKey key;
  std::map<Op, std::vector<TuningRow>> ops;
  // cpu only: shm calls of at least this many bytes (a rank's input) are split over the rank's
  // team of threads (TPCOMM_THREADS); smaller ones run on the calling thread alone.
  std::optional<std::uint64_t> team_min_bytes;
#if __cplusplus >= 202002L  // defaulted comparison: C++20 (the library); C++17 users go without
  bool operator==(const TuningEntry&) const = default;
#endif
};

struct Tuning {
  std::vector<TuningEntry> entries;
  std::string source;  // "built-in" or the file it came from
};

const Tuning& builtin_tuning();

// Parses and validates a tuning file; errors name the field path (kInvalidInput).
Tuning decode_tuning(std::string_view json_text, std::string source);
std::string encode_tuning(const Tuning& tuning, int indent = 2);

// The rows for one key and op: from `overrides` when an entry matches, else built-in.
// `description` says which entry served (for the plan's provenance line).
struct TuningLookup {
  const std::vector<TuningRow>* rows = nullptr;
  std::string description;
};
// A team splits calls from this size when no tuning entry says (`tpcomm tune` measures it).
constexpr std::uint64_t kDefaultTeamMinBytes = 256 << 10;
// The team_min_bytes of the cpu entry of `overrides` for groups of `world_size` (either mode),
// else kDefaultTeamMinBytes.
std::uint64_t find_team_min_bytes(const Tuning& overrides, int world_size);

TuningLookup find_tuning(const Tuning& overrides, DeviceType device, int min_sm, int world_size,
                         Mode mode, Op op);

}  // namespace tpcomm
