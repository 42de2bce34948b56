// Names of the facts enums as they appear in facts files, and small queries on facts.
#include "tpcomm/facts.hpp"

#include <algorithm>

namespace tpcomm {

std::string_view to_string(DeviceType type) {
  return type == DeviceType::kCuda ? "cuda" : "cpu";
}

std::string_view to_string(FabricState state) {
  switch (state) {
    case FabricState::kNotSupported:
      return "not_supported";
    case FabricState::kNotStarted:
      return "not_started";
    case FabricState::kInProgress:
      return "in_progress";
    case FabricState::kCompleted:
      return "completed";
  }
  return "unknown";
}

std::string_view to_string(Allocator allocator) {
  return allocator == Allocator::kVmm ? "vmm" : "legacy";
}

bool FabricInfo::has_known_cluster() const {
  if (!cluster_uuid) return false;
  // NVML reports all zeros when the GPU is not (yet) part of a fabric: unknown, never "the same".
  return std::any_of(cluster_uuid->begin(), cluster_uuid->end(),
                     [](char c) { return c != '0' && c != '-'; });
}

}  // namespace tpcomm
