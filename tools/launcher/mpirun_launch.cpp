// --launch mpirun (mpirun_launch.hpp).
#include "mpirun_launch.hpp"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

#include "mpirun_over_nodes.hpp"
#include "sim_nodes/node_links.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::cli {

int launch_under_mpirun(LaunchOptions l, const std::string& self,
                        const std::string& one_node_binding) {
  if (netlinks::find_program("mpirun").empty()) {
    throw Error(ErrorCode::kUnavailable, "mpirun is not installed (install openmpi-bin)");
  }
  // Open MPI refuses root unless told; these are our own ranks. Without MASTER_ADDR and
  // MASTER_PORT the ranks rendezvous over MPI itself.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  if (l.nodes == 1) {
    std::vector<std::string> argv = {
        "mpirun", "--oversubscribe", "--bind-to", one_node_binding, "-np", std::to_string(l.ranks)};
    argv.insert(argv.end(), l.command.begin(), l.command.end());
    std::vector<char*> args;
    for (auto& s : argv) args.push_back(s.data());
    args.push_back(nullptr);
    execvp("mpirun", args.data());
    throw Error(ErrorCode::kUnavailable, "cannot run mpirun (install openmpi-bin)");
  }
  if (l.ranks % l.nodes != 0) {
    throw invalid_input(
        fmt::format("mpirun over {} nodes needs the same number of ranks on every node (-n {})",
                    l.nodes, l.ranks));
  }
  if (l.node_network.mode == NodeNetworkOptions::Mode::kOff) {
    throw invalid_input(
        "mpirun over simulated nodes needs their own network: mpirun reaches them over it (drop "
        "--node-network off)");
  }
  l.node_network.mode = NodeNetworkOptions::Mode::kOn;
  l.mpirun_over_nodes = true;
  l.bind_cores = false;
  auto mpi = mpirun_over_nodes(l.ranks, l.nodes, self);
  l.command.insert(l.command.begin(), mpi.begin(), mpi.end());
  return launch(l);
}

}  // namespace tpcomm::cli
