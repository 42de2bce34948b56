// Simulated nodes for `tpcomm run --nodes K`: one holder process per node owns a new UTS, IPC
// and mount namespace (hostname sim-node-<i>, a private tmpfs on /dev/shm); ranks join the
// namespaces of their node's holder with setns(2) before exec. The holders die with the
// launcher (PR_SET_PDEATHSIG), and the namespaces with their last process.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace tpcomm::cli {

class SimulatedNodes {
 public:
  // Starts `count` holders; throws kInvalidInput (exit status 2) when namespaces cannot be made.
  explicit SimulatedNodes(int count);
  ~SimulatedNodes();
  SimulatedNodes(const SimulatedNodes&) = delete;
  SimulatedNodes& operator=(const SimulatedNodes&) = delete;

  // Paths of node i's namespace files, opened by a rank between fork and exec.
  const std::vector<std::string>& namespace_paths(int node) const {
    return paths_[static_cast<std::size_t>(node)];
  }

 private:
  void stop_all();
  std::vector<pid_t> holders_;
  std::vector<std::vector<std::string>> paths_;
};

}  // namespace tpcomm::cli
