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

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::cli {
namespace {

// In the holder child: make the namespaces, report 0 or errno on `report`, then wait to die.
[[noreturn]] void run_holder(int node, int report) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int err = 0;
  char hostname[32];
  std::snprintf(hostname, sizeof(hostname), "sim-node-%d", node);
  if (unshare(CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNS) != 0 ||
      mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0 ||
      sethostname(hostname, std::strlen(hostname)) != 0) {
    err = errno;
  }
  [[maybe_unused]] auto n = write(report, &err, sizeof(err));
  close(report);
  if (err != 0) _exit(1);
  while (true) pause();
}

}  // namespace

SimulatedNodes::SimulatedNodes(int count) {
  for (int node = 0; node < count; ++node) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
      throw Error(ErrorCode::kUnavailable, "pipe(): " + std::string(std::strerror(errno)));
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      run_holder(node, fds[1]);
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
          "--nodes needs new UTS, IPC and mount namespaces, and creating them failed: {} (run as "
          "root or with CAP_SYS_ADMIN, or leave out --nodes)",
          why));
    }
    holders_.push_back(pid);
    std::vector<std::string> paths;
    for (const char* ns : {"uts", "ipc", "mnt"})
      paths.push_back(fmt::format("/proc/{}/ns/{}", pid, ns));
    paths_.push_back(paths);
  }
}

SimulatedNodes::~SimulatedNodes() {
  stop_all();
}

void SimulatedNodes::stop_all() {
  for (pid_t pid : holders_) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  holders_.clear();
}

}  // namespace tpcomm::cli
