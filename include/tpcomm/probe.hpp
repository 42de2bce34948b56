// The probe: this machine's facts (host identity, CPU features, CUDA devices through the driver
// and NVML, loaded at run time). It never throws and never crashes on a missing library: what it
// could not learn is left unknown and explained in the status lines.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tpcomm/facts.hpp"

namespace tpcomm {

struct HostIdentity {
  std::string hostname;
  std::string boot_id;  // /proc/sys/kernel/random/boot_id; empty when unreadable
};

struct LocalFacts {
  HostIdentity host;
  std::vector<std::string> cpu_isa;  // the features collectives care about (avx2, avx512f, ...)
  std::optional<int> numa;           // NUMA node of the CPU this process runs on
  std::vector<DeviceFacts> gpus;     // one per visible CUDA device, in CUDA ordinal order
  std::string cuda_status;           // what was found, or why no CUDA device is usable
  std::string nvml_status;           // what NVML provided, or why not
};

LocalFacts probe_local();

// The facts of `ranks` ranks of one device type on this machine, as a facts-v1 table. CUDA rank
// r uses device r modulo the device count. Throws kInvalidInput when cuda is asked for and no
// device was found (the message carries cuda_status).
FactsTable local_facts_table(const LocalFacts& local, int ranks, DeviceType type);

}  // namespace tpcomm
