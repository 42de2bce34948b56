// mpirun across the simulated nodes (mpirun_over_nodes.hpp).
#include "mpirun_over_nodes.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "orphan_reaper.hpp"
#include "sim_nodes/node_links.hpp"

namespace tpcomm::cli {

std::string node_agent_map(const SimulatedNodes& nodes, int count) {
  std::vector<std::string> entries;
  for (int i = 0; i < count; ++i) {
    entries.push_back(
        fmt::format("{}={}", netlinks::node_address(i), fmt::join(nodes.namespace_paths(i), ",")));
  }
  return fmt::format("{}", fmt::join(entries, ";"));
}

std::vector<std::string> mpirun_over_nodes(int ranks, int nodes, const std::string& self) {
  std::vector<std::string> hosts;
  for (int i = 0; i < nodes; ++i) {
    hosts.push_back(fmt::format("{}:{}", netlinks::node_address(i), ranks / nodes));
  }
  // The nodes' /24: node_address(i) is 198.18.0.<i + 1>.
  const std::string subnet = netlinks::node_address(0).substr(0, 9) + "0/24";
  // Unbound: mpirun would bind each node's ranks to cores 0, 1, ... of what is one machine.
  return {"mpirun", "--oversubscribe", "--bind-to", "none", "-np", std::to_string(ranks), "--host",
          fmt::format("{}", fmt::join(hosts, ",")), "--mca", "plm_rsh_agent", self + " node-agent",
          "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", subnet, "--mca",
          "oob_tcp_if_include", subnet,
          // The nodes share this machine's cores: a rank waiting in MPI yields, as Open MPI
          // makes ranks do on a node it knows to be oversubscribed (each node's slots hide it).
          "--mca", "mpi_yield_when_idle", "1"};
}

namespace {

// The namespace files of the node at `address` in the map, or none.
std::vector<std::string> paths_of(const std::string& map, const std::string& address) {
  std::stringstream entries(map);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || entry.substr(0, eq) != address) continue;
    std::vector<std::string> paths;
    std::stringstream list(entry.substr(eq + 1));
    std::string path;
    while (std::getline(list, path, ',')) paths.push_back(path);
    return paths;
  }
  return {};
}

// Runs `command` (mpirun's daemon, orted) under /bin/sh and stays its parent, so that nothing of
// the job outlives it on this node: the agent is the subreaper of everything the daemon starts,
// ends with mpirun (PR_SET_PDEATHSIG), and on either end, the daemon's or mpirun's, stops what is
// left (ranks waiting in MPI_Finalize for a peer that is gone used to spin on forever).
int supervise(const std::string& command) {
  become_subreaper();
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  const pid_t child = fork();
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the daemon ends with its agent
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  if (child < 0) {
    std::cerr << fmt::format("tpcomm node-agent: fork: {}\n", std::strerror(errno));
    return 127;
  }
  int status = 0;
  int code = -1;
  while (code < 0) {
    if (getppid() != parent) {  // mpirun ended before the PR_SET_PDEATHSIG above took hold
      code = 128 + SIGTERM;
      break;
    }
    const timespec slice{0, 100'000'000};
    if (const int s = sigtimedwait(&mask, nullptr, &slice); s > 0) {
      kill(child, SIGTERM);
      code = 128 + s;
      break;
    }
    if (waitpid(child, &status, WNOHANG) == child) {
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {  // orphans re-parented here that ended
    }
  }
  const auto left = stop_descendants({}, std::chrono::seconds(2));
  if (!left.stopped.empty()) {
    std::cerr << fmt::format("tpcomm node-agent: stopped what mpirun's daemon left: {}\n",
                             fmt::join(left.stopped, ", "));
  }
  return code;
}

}  // namespace

int run_node_agent(int argc, char** argv) {
  const char* map = std::getenv(kNodeAgentMapVariable);
  if (argc < 4 || map == nullptr) {
    std::cerr << "tpcomm node-agent ADDRESS COMMAND...: mpirun's agent for the simulated nodes "
                 "of tpcomm bench --compare mpi --nodes K, not a command of its own\n";
    return 2;
  }
  const std::string address = argv[2];
  const auto paths = paths_of(map, address);
  if (paths.empty()) {
    std::cerr << fmt::format("tpcomm node-agent: {} is no simulated node's address ({})\n", address,
                             map);
    return 2;
  }
  char cwd[4096];
  const bool have_cwd = getcwd(cwd, sizeof(cwd)) != nullptr;
  for (const auto& path : paths) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, 0) != 0) {
      std::cerr << fmt::format("tpcomm node-agent: cannot join {}: {}\n", path,
                               std::strerror(errno));
      return 127;
    }
    close(fd);
  }
  if (have_cwd && chdir(cwd) != 0)
    std::cerr << "tpcomm node-agent: cannot return to " << cwd << "\n";
  // What tpcomm run gives a rank of this node: its address for the store and Gloo.
  setenv("TPCOMM_SOCKET_ADDRESS", address.c_str(), 1);
  std::string command;
  for (int i = 3; i < argc; ++i) command += (i > 3 ? " " : "") + std::string(argv[i]);
  return supervise(command);
}

}  // namespace tpcomm::cli
