// The probe's parts (host, CPU, GPUs), each a separate file; probe.cpp puts them together.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tpcomm/probe.hpp"

namespace tpcomm::probe {

HostIdentity probe_host();

const std::vector<std::string>& relevant_isa_features();
// The relevant features named in a /proc/cpuinfo text.
std::vector<std::string> isa_from_cpuinfo(const std::string& cpuinfo);
std::vector<std::string> probe_cpu_isa();
std::optional<int> probe_numa_node();

struct GpuProbeResult {
  std::vector<DeviceFacts> gpus;
  std::string cuda_status;
  std::string nvml_status;
};
GpuProbeResult probe_gpus();

}  // namespace tpcomm::probe
