// NVLink islands from per-GPU link lists: GPUs joined by NVLink, directly or through NVSwitch,
// form one island. Pure logic, so it is tested without a GPU.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tpcomm::probe {

enum class LinkPeer { kGpu, kSwitch, kOther };

struct ActiveLink {
  LinkPeer peer = LinkPeer::kOther;
  std::string remote_bus_id;  // for kGpu: the peer's PCI bus id
};

struct GpuLinks {
  std::string bus_id;
  std::vector<ActiveLink> links;  // active links only
};

// "00000000:1B:00.0" and "0000:1b:00.0" -> "0000:1b:00.0"; unparsable ids are lower-cased.
std::string normalize_bus_id(const std::string& bus_id);

// Island number per GPU (nullopt: no active NVLink). Islands are numbered from 0 in the order
// of their lowest GPU.
std::vector<std::optional<int>> nvlink_islands(const std::vector<GpuLinks>& gpus);

}  // namespace tpcomm::probe
