// hwloc's NUMA nodes against the CPUs bind_ranks hands out.
#include "numa_map.hpp"

#include <hwloc.h>
#include <unistd.h>

#include <vector>

#include <fmt/format.h>

#include "launcher/cpu_binding.hpp"
#include "launcher/team_launch.hpp"
#include "transport/cpu/team_size.hpp"

namespace tpcomm::cli {
namespace {

struct Node {
  int index;
  cpu_set_t cpus;
};

std::vector<Node> nodes() {
  std::vector<Node> out;
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return out;
  if (hwloc_topology_load(t) == 0) {
    const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t obj = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
      Node node{static_cast<int>(obj->os_index), {}};
      CPU_ZERO(&node.cpus);
      for (int cpu = hwloc_bitmap_first(obj->cpuset); cpu >= 0 && cpu < CPU_SETSIZE;
           cpu = hwloc_bitmap_next(obj->cpuset, cpu)) {
        CPU_SET(cpu, &node.cpus);
      }
      out.push_back(node);
    }
  }
  hwloc_topology_destroy(t);
  return out;
}

std::string nodes_of(const cpu_set_t& cpus, const std::vector<Node>& all) {
  std::vector<int> hit;
  for (const Node& n : all) {
    cpu_set_t both;
    CPU_AND(&both, &cpus, &n.cpus);
    if (CPU_COUNT(&both) > 0) hit.push_back(n.index);
  }
  return hit.empty() ? std::string("unknown") : fmt::format("{}", fmt::join(hit, ","));
}

}  // namespace

std::string numa_nodes_text() {
  const auto all = nodes();
  if (all.empty()) return "unknown (hwloc cannot read this machine)";
  std::vector<std::string> parts;
  for (const Node& n : all) {
    parts.push_back(fmt::format("node {} cpus {}", n.index, cpu_list_text(n.cpus)));
  }
  return fmt::format("{} node{}: {}", all.size(), all.size() == 1 ? "" : "s",
                     fmt::join(parts, ", "));
}

std::string group_node_map(int ranks, int threads) {
  const auto all = nodes();
  const RankBinding binding = bind_ranks(usable_cores_here(), ranks, wants_core_shares(threads));
  if (binding.level == BindLevel::kNone) {
    return fmt::format(
        "  {} ranks outnumber this machine's CPUs: not bound, pages placed by first "
        "touch, one thread each\n",
        ranks);
  }
  const int online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::string out;
  for (int r = 0; r < ranks; ++r) {
    const cpu_set_t& cpus = binding.cpus[static_cast<std::size_t>(r)];
    const transport::cpu::TeamSize team =
        transport::cpu::team_size(threads, binding.cpus, r, ranks, online);
    out += fmt::format("  rank {}: cpus {}, pages on node {}, team of {}\n", r, cpu_list_text(cpus),
                       nodes_of(cpus, all), team.why);
  }
  return out;
}

}  // namespace tpcomm::cli
