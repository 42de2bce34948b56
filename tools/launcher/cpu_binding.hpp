// Where `--bind-to core` puts each rank (tpcomm run, bench, tune): a physical core of its own,
// as mpirun's --bind-to core does. Counting CPU numbers is not enough: many VMs number a core's
// two hardware threads 0 and 1, so "rank r on the r-th CPU" put two ranks on one core's shared
// units while other cores idled. The cores come from hwloc.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace tpcomm::cli {

// The usable hardware threads (OS CPU numbers) of each core that has one, cores in topology
// order (package, then core within it). `usable`: the CPUs this process may run on.
// `synthetic`: an hwloc synthetic description ("pack:2 core:4 pu:2") used instead of this
// machine, for tests. When hwloc cannot read the machine, each usable CPU counts as a core.
using CoreThreads = std::vector<std::vector<int>>;
CoreThreads usable_cores(const cpu_set_t& usable, const char* synthetic = nullptr);
CoreThreads usable_cores_here();  // of this process's CPU affinity

enum class BindLevel { kCore, kThread, kNone };

struct RankBinding {
  BindLevel level = BindLevel::kNone;
  std::vector<cpu_set_t> cpus;  // cpus[r]: rank r's CPUs; empty when kNone
};

// A core each (all its usable threads) when there are at least as many cores as ranks; else a
// hardware thread each, every core's first thread before any core's second; else nothing, since
// two ranks bound to one CPU would wait out each other's time slices at every barrier.
// `shares`: each rank gets an equal share of the cores instead, consecutive in topology order
// (so a share fills one package, or NUMA node, before the next), for ranks whose team of threads
// (TPCOMM_THREADS) splits their calls; ranks outnumbering cores get the single-CPU binding.
RankBinding bind_ranks(const CoreThreads& cores, int ranks, bool shares = false);

// The CPUs of a set as ranges, as taskset and /sys write them: "0-3,8".
std::string cpu_list_text(const cpu_set_t& cpus);

// "0,4 | 1,5": each core's threads, cores apart; at most `max_cores`, then "| ...".
std::string describe_cores(const CoreThreads& cores, std::size_t max_cores = 8);

}  // namespace tpcomm::cli
