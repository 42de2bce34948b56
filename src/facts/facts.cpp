// Small queries on facts.
#include "tpcomm/facts.hpp"

#include <algorithm>

namespace tpcomm {

bool FabricInfo::has_known_cluster() const {
  if (!cluster_uuid) return false;
  // NVML reports all zeros when the GPU is not (yet) part of a fabric: unknown, never "the same".
  return std::any_of(cluster_uuid->begin(), cluster_uuid->end(),
                     [](char c) { return c != '0' && c != '-'; });
}

}  // namespace tpcomm
