// tpcomm run: N ranks of a program as one group (tpcomm store is in cmd_store.cpp).
#include <memory>
#include <optional>
#include <string>

#include "cli_util.hpp"
#include "commands.hpp"
#include "launcher/launcher.hpp"
#include "launcher/mpirun_launch.hpp"
#include "launcher/team_launch.hpp"
#include "sim_nodes/node_network_cli.hpp"

namespace tpcomm::cli {

void add_run_command(CLI::App& app, int& exit_status) {
  auto opts = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Start N ranks of a program as one group (with a store), prefix their output with the "
      "rank, and stop them all when one fails");
  cmd->add_option("-n,--ranks", opts->ranks, "number of ranks")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--nodes", opts->nodes,
                  "split the ranks over K simulated nodes (own UTS/IPC/mount namespaces, private "
                  "/dev/shm, hostname sim-node-<i>, and with --node-network their own network; "
                  "needs root)")
      ->capture_default_str();
  add_node_network_options(*cmd, opts->node_network, true);
  cmd->add_option("--timeout", opts->timeout_s, "stop the job after S seconds (exit status 124)");
  cmd->add_option("--grace", opts->grace_s, "seconds between SIGTERM and SIGKILL when stopping")
      ->capture_default_str();
  cmd->add_flag(
      "--keep-going", opts->keep_going,
      "when a rank fails, let the others end on their own (within TPCOMM_TIMEOUT_MS + 2 s, "
      "then they are stopped)");
  auto bind_to = std::make_shared<std::string>("none");
  cmd->add_option(
         "--bind-to", *bind_to,
         "core: each rank on a core of its own, or a hardware thread of its own when cores "
         "are fewer (docs/communicator.md)")
      ->check(CLI::IsMember({"core", "none"}))
      ->capture_default_str();
  auto launcher = std::make_shared<std::string>("tpcomm");
  cmd->add_option("--launch", *launcher,
                  "who starts the ranks: tpcomm, or mpirun (the ranks bootstrap through MPI; with "
                  "--nodes, mpirun runs in node 0 and reaches the others over their links)")
      ->check(CLI::IsMember({"tpcomm", "mpirun"}))
      ->capture_default_str();
  auto threads = std::make_shared<std::optional<int>>();
  add_threads_option(cmd, *threads);
  cmd->add_option("command", opts->command, "-- PROGRAM ARGS...")->required();
  cmd->callback([opts, bind_to, launcher, threads, &exit_status] {
    opts->bind_cores = *bind_to == "core";
    opts->core_shares =
        wants_core_shares(apply_threads_option(*threads, opts->ranks, opts->bind_cores));
    const bool shares_under_mpirun = opts->bind_cores && opts->core_shares;
    exit_status =
        *launcher == "mpirun"
            ? launch_under_mpirun(*opts, self_executable(),
                                  opts->bind_cores && !shares_under_mpirun ? "core" : "none")
            : launch(*opts);
  });
}

}  // namespace tpcomm::cli
