// What one rank's process is given by tpcomm run: its environment, its CPUs, and the exec itself
// (between fork and exec, so only async-signal-safe calls on data prepared before the fork).
#pragma once

#include <sched.h>
#include <signal.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tpcomm::cli {

// What every rank of one launch shares: the store's port, the group's name on it and the
// secret that the store and every rank prove.
struct GroupLaunch {
  std::string master_addr = "127.0.0.1";  // node 0's address with the node network
  std::uint16_t port = 0;                 // tpcomm's store: TPCOMM_STORE_PORT
  std::uint16_t torch_port = 0;           // MASTER_PORT, for torch.distributed's own store
  std::string group_id;
  std::string secret;
};

// Our environment plus the launch variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT (torch's), TPCOMM_STORE_PORT, TPCOMM_GROUP_ID, TPCOMM_STORE_SECRET,
// and TPCOMM_SOCKET_ADDRESS when
// `socket_address` is given: the rank's node's address), ours replaced.
std::vector<std::string> rank_environment(int rank, int size, int local_rank, int local_size,
                                          const GroupLaunch& group,
                                          const std::string& socket_address);

// mpirun's over the simulated nodes: ours without the launch variables (the ranks get MPI's), plus
// node 0's address, the node agent's map and Open MPI's consent to run as root (these are our
// own ranks).
std::vector<std::string> mpirun_environment(const std::string& node0_address,
                                            const std::string& agent_map);

// argv-style pointers into `strings`, null-terminated.
std::vector<char*> pointers(std::vector<std::string>& strings);

// In the child: its own process group, death with the launcher, output to the pipes, the
// simulated node's namespaces, the CPU, default signals, then exec; on failure a message and
// exit 127.
[[noreturn]] void exec_rank(int out_write, int err_write, const std::vector<std::string>* ns_paths,
                            const std::string& cwd, char** argv, char** envp,
                            const sigset_t& old_mask, const cpu_set_t* cpu);

}  // namespace tpcomm::cli
