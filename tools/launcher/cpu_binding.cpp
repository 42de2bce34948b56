// Ranks to cores through hwloc (cpu_binding.hpp).
#include "cpu_binding.hpp"

#include <hwloc.h>

#include <algorithm>
#include <memory>

#include <fmt/format.h>

namespace tpcomm::cli {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

Topology load_topology(const char* synthetic) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return nullptr;
  Topology t(raw);
  if (synthetic != nullptr && hwloc_topology_set_synthetic(raw, synthetic) != 0) return nullptr;
  if (hwloc_topology_load(raw) != 0) return nullptr;
  return t;
}

CoreThreads each_cpu_a_core(const cpu_set_t& usable) {
  CoreThreads out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &usable)) out.push_back({cpu});
  }
  return out;
}

}  // namespace

CoreThreads usable_cores(const cpu_set_t& usable, const char* synthetic) {
  Topology topology = load_topology(synthetic);
  if (!topology) return each_cpu_a_core(usable);
  const int count = hwloc_get_nbobjs_by_type(topology.get(), HWLOC_OBJ_CORE);
  // A machine (or container) hwloc shows no cores for: hardware threads are what there is.
  const hwloc_obj_type_t unit = count > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  const int units = count > 0 ? count : hwloc_get_nbobjs_by_type(topology.get(), HWLOC_OBJ_PU);
  CoreThreads out;
  for (int i = 0; i < units; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(topology.get(), unit, static_cast<unsigned>(i));
    std::vector<int> threads;
    for (int cpu = hwloc_bitmap_first(core->cpuset); cpu >= 0;
         cpu = hwloc_bitmap_next(core->cpuset, cpu)) {
      if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &usable)) threads.push_back(cpu);
    }
    if (!threads.empty()) out.push_back(std::move(threads));
  }
  return out.empty() ? each_cpu_a_core(usable) : out;
}

CoreThreads usable_cores_here() {
  cpu_set_t usable;
  CPU_ZERO(&usable);
  if (sched_getaffinity(0, sizeof(usable), &usable) != 0) return {};
  return usable_cores(usable);
}

RankBinding bind_ranks(const CoreThreads& cores, int ranks, bool shares) {
  RankBinding out;
  if (ranks <= 0) return out;
  auto set_of = [](const std::vector<int>& cpus) {
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int cpu : cpus) CPU_SET(cpu, &s);
    return s;
  };
  if (static_cast<std::size_t>(ranks) <= cores.size()) {
    out.level = BindLevel::kCore;
    const std::size_t each = shares ? cores.size() / static_cast<std::size_t>(ranks) : 1;
    for (std::size_t r = 0; r < static_cast<std::size_t>(ranks); ++r) {
      std::vector<int> cpus;
      for (std::size_t c = r * each; c < (r + 1) * each; ++c) {
        cpus.insert(cpus.end(), cores[c].begin(), cores[c].end());
      }
      out.cpus.push_back(set_of(cpus));
    }
    return out;
  }
  // Threads in rounds: every core's first usable thread, then every core's second, ...
  std::size_t most = 0;
  for (const auto& c : cores) most = std::max(most, c.size());
  std::vector<int> order;
  for (std::size_t round = 0; round < most; ++round) {
    for (const auto& c : cores) {
      if (round < c.size()) order.push_back(c[round]);
    }
  }
  if (static_cast<std::size_t>(ranks) > order.size()) return out;
  out.level = BindLevel::kThread;
  for (int r = 0; r < ranks; ++r) out.cpus.push_back(set_of({order[static_cast<std::size_t>(r)]}));
  return out;
}

std::string cpu_list_text(const cpu_set_t& cpus) {
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &cpus)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &cpus)) ++last;
    out += fmt::format("{}{}", out.empty() ? "" : ",", cpu);
    if (last > cpu) out += fmt::format("-{}", last);
    cpu = last;
  }
  return out;
}

std::string describe_cores(const CoreThreads& cores, std::size_t max_cores) {
  std::string out;
  for (std::size_t i = 0; i < cores.size() && i < max_cores; ++i) {
    out += fmt::format("{}{}", i == 0 ? "" : " | ", fmt::join(cores[i], ","));
  }
  if (cores.size() > max_cores) out += " | ...";
  return out;
}

}  // namespace tpcomm::cli
