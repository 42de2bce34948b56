// TPCOMM_THREADS for the ranks a command starts, checked against the cores they will share.
#include "team_launch.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "cpu_binding.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::cli {

CLI::Option* add_threads_option(CLI::App* cmd, std::optional<int>& threads) {
  return cmd
      ->add_option("--threads", threads,
                   "threads per rank that split each large shm call (sets TPCOMM_THREADS for the "
                   "ranks; 0: each rank's share of the cores; with --bind-to core each rank is "
                   "bound to an equal share of the cores unless this is 1)")
      ->check(CLI::Range(0, 256));
}

int apply_threads_option(const std::optional<int>& threads, int ranks, bool bind_cores) {
  if (threads) setenv("TPCOMM_THREADS", std::to_string(*threads).c_str(), 1);
  const int t = static_cast<int>(env_integer("TPCOMM_THREADS"));
  if (t > 1 && bind_cores) {
    const std::size_t cores = usable_cores_here().size();
    const std::size_t share = ranks > 0 ? cores / static_cast<std::size_t>(ranks) : 0;
    if (share < static_cast<std::size_t>(t)) {
      throw invalid_input(fmt::format(
          "--threads {}: {} ranks on {} cores leave each rank {} core{}; ask for at most {}, or "
          "pass --bind-to none to let the threads share cores",
          t, ranks, cores, share, share == 1 ? "" : "s", share > 0 ? share : 1));
    }
  }
  return t;
}

}  // namespace tpcomm::cli
