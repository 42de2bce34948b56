// probe_local() and the facts table of N local ranks.
#include <fmt/format.h>

#include "common/log_format.hpp"
#include "probe_parts.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/version.hpp"

namespace tpcomm {

LocalFacts probe_local() {
  LocalFacts f;
  f.host = probe::probe_host();
  f.cpu_isa = probe::probe_cpu_isa();
  f.numa = probe::probe_numa_node();
  auto gpus = probe::probe_gpus();
  f.gpus = std::move(gpus.gpus);
  f.cuda_status = std::move(gpus.cuda_status);
  f.nvml_status = std::move(gpus.nvml_status);
  return f;
}

FactsTable local_facts_table(const LocalFacts& local, int ranks, DeviceType type) {
  if (ranks < 1 || ranks > kMaxRanks) {
    throw invalid_input(fmt::format("--ranks {}: expected 1 to {}", ranks, kMaxRanks));
  }
  if (type == DeviceType::kCuda && local.gpus.empty()) {
    throw invalid_input(fmt::format("no CUDA device on this machine: {}", local.cuda_status));
  }
  FactsTable t;
  t.comment =
      fmt::format("probed by tpcomm {} on host {} (boot id {}); cuda: {}; {}", kVersion,
                  local.host.hostname, local.host.boot_id.empty() ? "unknown" : local.host.boot_id,
                  local.cuda_status, local.nvml_status);
  for (int r = 0; r < ranks; ++r) {
    RankFacts rf;
    rf.host = local.host.hostname;
    if (type == DeviceType::kCuda) {
      rf.device = local.gpus[static_cast<std::size_t>(r) % local.gpus.size()];
    } else {
      rf.device.type = DeviceType::kCpu;
      rf.device.numa = local.numa;
      rf.device.isa = local.cpu_isa;
    }
    t.ranks.push_back(std::move(rf));
  }
  if (type == DeviceType::kCuda && static_cast<std::size_t>(ranks) > local.gpus.size()) {
    TPCOMM_LOG(kWarn, "probe", "{} ranks on {} CUDA devices: ranks share devices", ranks,
               local.gpus.size());
  }
  return t;
}

}  // namespace tpcomm
