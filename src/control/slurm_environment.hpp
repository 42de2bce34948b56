// A group started by Slurm's srun (one task per rank): SLURM_PROCID, SLURM_NTASKS and the step's
// node list give rank, size and the host that serves the store (docs/communicator.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpcomm::control {

struct SlurmLaunch {
  int rank = 0;
  int size = 0;
  bool one_node = false;   // SLURM_STEP_NUM_NODES (or SLURM_NNODES) is 1
  std::string first_host;  // of SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST); rank 0 runs there
  // MASTER_PORT when set, else 20000 + (job id x 16 + step id) mod 12000: the same on every task
  // of the step, and different for the steps and jobs that may share a node; below 32768, where
  // Linux's ephemeral range (outgoing connections' local ports) starts.
  std::uint16_t port = 0;
};

// The srun launch of this process, or nullopt when SLURM_PROCID / SLURM_NTASKS are not set.
// Throws kInvalidInput naming the variable when one is malformed or the node list is missing.
std::optional<SlurmLaunch> slurm_launch_from_environment();

// The first host of a Slurm host list: "node[01-04,07],gpu3" -> "node01".
std::string first_host_of_nodelist(std::string_view list);

}  // namespace tpcomm::control
