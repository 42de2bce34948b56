// The facts of a group (docs/facts.md, facts file version 1): what each rank's hardware can do.
// Value types only; the JSON codec is in facts_json.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpcomm/types.hpp"

namespace tpcomm {

inline constexpr int kFactsVersion = 1;
// Largest group a facts document may describe. Guards against `repeat: 1000000000`.
inline constexpr int kMaxRanks = 4096;

enum class DeviceType { kCuda, kCpu };
enum class FabricState { kNotSupported, kNotStarted, kInProgress, kCompleted };
enum class Allocator { kLegacy, kVmm };

template <>
struct Names<DeviceType> {
  static constexpr NamedValue<DeviceType> table[] = {{DeviceType::kCuda, "cuda"},
                                                     {DeviceType::kCpu, "cpu"}};
};
template <>
struct Names<FabricState> {
  static constexpr NamedValue<FabricState> table[] = {{FabricState::kNotSupported, "not_supported"},
                                                      {FabricState::kNotStarted, "not_started"},
                                                      {FabricState::kInProgress, "in_progress"},
                                                      {FabricState::kCompleted, "completed"}};
};
template <>
struct Names<Allocator> {
  static constexpr NamedValue<Allocator> table[] = {{Allocator::kLegacy, "legacy"},
                                                    {Allocator::kVmm, "vmm"}};
};
constexpr std::string_view to_string(DeviceType v) {
  return name_of(v);
}
constexpr std::string_view to_string(FabricState v) {
  return name_of(v);
}
constexpr std::string_view to_string(Allocator v) {
  return name_of(v);
}
static_assert(names_in_declaration_order<DeviceType>() &&
              names_in_declaration_order<FabricState>() && names_in_declaration_order<Allocator>());

// NVML GPU fabric info (multi-node NVLink). cluster_uuid is lower-case text; all zeros = unknown.
struct FabricInfo {
  FabricState state = FabricState::kNotSupported;
  std::optional<std::string> cluster_uuid;
  std::optional<std::int64_t> clique_id;

  // A cluster uuid that is present and not all zeros.
  bool has_known_cluster() const;
#if __cplusplus >= 202002L  // defaulted comparison: C++20 (the library); C++17 users go without
  bool operator==(const FabricInfo&) const = default;
#endif
};

struct DeviceFacts {
  DeviceType type = DeviceType::kCpu;
  std::optional<int> index;          // device ordinal on its host
  std::optional<int> sm;             // compute capability x 10 (cuda only)
  std::optional<int> nvlink_island;  // nullopt: no NVLink
  bool p2p = false;
  bool multicast = false;
  bool vmm = false;
  bool fabric_handle = false;
  std::optional<FabricInfo> fabric;  // nullopt: unknown
  std::optional<int> numa;
  std::vector<std::string> isa;  // CPU ISA features, e.g. avx512f
#if __cplusplus >= 202002L  // defaulted comparison: C++20 (the library); C++17 users go without
  bool operator==(const DeviceFacts&) const = default;
#endif
};

struct RankFacts {
  std::string host;
  DeviceFacts device;
  Allocator allocator = Allocator::kLegacy;
  // The MPI library of the world this rank was started in, when the group was bootstrapped
  // through it (mpirun without MASTER_ADDR): hier_mpi's lanes run over that world. nullopt: no
  // MPI world (any other launcher, or MPI unusable from tpcomm's threads).
  std::optional<std::string> mpi;
  std::optional<std::string> comment;
#if __cplusplus >= 202002L  // defaulted comparison: C++20 (the library); C++17 users go without
  bool operator==(const RankFacts&) const = default;
#endif
};

// One document: the ranks in rank order (repeat already expanded).
struct FactsTable {
  std::vector<RankFacts> ranks;
  std::optional<std::string> comment;
#if __cplusplus >= 202002L  // defaulted comparison: C++20 (the library); C++17 users go without
  bool operator==(const FactsTable&) const = default;
#endif
};

}  // namespace tpcomm
