// Namespace holders for simulated nodes.
#include "sim_nodes.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::cli {
namespace {

constexpr int kHubHolder = -1;

// In the holder child: make the namespaces (`flags`; a node's also get its hostname and /dev/shm),
// report 0 or errno on `report`, then wait to die.
[[noreturn]] void run_holder(int node, int flags, pid_t launcher, int report) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(1);  // the launcher ended before the line above
  int err = 0;
  char hostname[32];
  std::snprintf(hostname, sizeof(hostname), "sim-node-%d", node);
  // errno of the first call that failed (the others are not made).
  if (unshare(flags) != 0 ||
      (node != kHubHolder &&
       (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0 ||
        sethostname(hostname, std::strlen(hostname)) != 0))) {
    err = errno;
  }
  [[maybe_unused]] auto n = write(report, &err, sizeof(err));
  close(report);
  if (err != 0) _exit(1);
  while (true) pause();
}

}  // namespace

SimulatedNodes::SimulatedNodes(int count, const NodeNetworkOptions* network) {
  const int net = network ? CLONE_NEWNET : 0;
  for (int node = 0; node < count; ++node) {
    const pid_t pid = start_holder(node, CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNS | net);
    std::vector<std::string> paths;
    // The network before the mount namespace: /proc is still the launcher's when it is opened.
    for (const char* ns : {"uts", "ipc", "net", "mnt"}) {
      if (net || std::strcmp(ns, "net") != 0)
        paths.push_back(fmt::format("/proc/{}/ns/{}", pid, ns));
    }
    paths_.push_back(paths);
  }
  if (!network) return;
  const std::vector<pid_t> nodes = holders_;
  const pid_t hub = start_holder(kHubHolder, CLONE_NEWNET);
  try {
    network_ = std::make_unique<NodeNetwork>(hub, nodes, *network);
  } catch (...) {
    stop_all();
    throw;
  }
}

pid_t SimulatedNodes::start_holder(int node, int flags) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw Error(ErrorCode::kUnavailable, "pipe(): " + std::string(std::strerror(errno)));
  const pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    run_holder(node, flags, launcher, fds[1]);
  }
  close(fds[1]);
  int err = -1;
  const bool got = read(fds[0], &err, sizeof(err)) == static_cast<ssize_t>(sizeof(err));
  close(fds[0]);
  if (pid < 0 || !got || err != 0) {
    if (pid > 0) waitpid(pid, nullptr, 0);
    const std::string why = pid < 0 ? std::strerror(errno)
                            : got   ? std::strerror(err)
                                    : "the holder died";
    stop_all();
    throw invalid_input(fmt::format(
        "--nodes needs new UTS, IPC and mount namespaces{}, and creating them failed: {} (run as "
        "root or with CAP_SYS_ADMIN{}, or leave out --nodes)",
        flags & CLONE_NEWNET ? " and network namespaces" : "", why,
        flags & CLONE_NEWNET ? " and CAP_NET_ADMIN, --node-network off" : ""));
  }
  holders_.push_back(pid);
  return pid;
}

SimulatedNodes::~SimulatedNodes() {
  stop_all();
}

void SimulatedNodes::stop_all() {
  network_.reset();
  for (pid_t pid : holders_) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  holders_.clear();
}

std::unique_ptr<SimulatedNodes> start_simulated_nodes(int count,
                                                      const NodeNetworkOptions& options) {
  using Mode = NodeNetworkOptions::Mode;
  // The first option given that only the node network can honour.
  const char* shaping = options.rate_bits         ? "--link-rate"
                        : options.loss_percent    ? "--link-loss"
                        : !options.faults.empty() ? option_of(options.faults.front().kind)
                                                  : nullptr;
  const bool shaped = shaping != nullptr;
  for (const LinkFault& f : options.faults) {
    if (count >= 2 && f.node >= count) {
      throw invalid_input(
          fmt::format("{} {}@...: there are nodes 0 to {}", option_of(f.kind), f.node, count - 1));
    }
  }
  if (count < 2) {
    if (shaped || options.mode == Mode::kOn) {
      throw invalid_input(fmt::format("{} needs simulated nodes: add --nodes K (K >= 2)",
                                      shaped ? shaping : "--node-network on"));
    }
    return nullptr;
  }
  if (options.mode == Mode::kOff) {
    if (shaped) throw invalid_input(fmt::format("{} needs --node-network on or auto", shaping));
    return std::make_unique<SimulatedNodes>(count, nullptr);
  }
  auto why = why_no_node_network(options);
  if (why && (options.mode == Mode::kOn || shaped)) {
    throw invalid_input(
        fmt::format("{} cannot be given: {}", shaped ? shaping : "--node-network on", *why));
  }
  if (why) {
    std::cerr << "tpcomm run: the simulated nodes share this host's network (" << *why
              << "; --node-network off says this is meant)" << std::endl;
    return std::make_unique<SimulatedNodes>(count, nullptr);
  }
  try {
    return std::make_unique<SimulatedNodes>(count, &options);
  } catch (const Error& e) {
    if (options.mode == Mode::kOn || shaped) throw;
    // A sandbox that refuses network namespaces to a process holding the capabilities.
    std::cerr << "tpcomm run: the simulated nodes share this host's network (" << e.what() << ")"
              << std::endl;
    return std::make_unique<SimulatedNodes>(count, nullptr);
  }
}

}  // namespace tpcomm::cli
