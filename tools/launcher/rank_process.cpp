// The rank side of tpcomm run (rank_process.hpp).
#include "rank_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "mpirun_over_nodes.hpp"

namespace tpcomm::cli {

namespace {

const char* const kLaunchVariables[] = {"RANK=",
                                        "WORLD_SIZE=",
                                        "LOCAL_RANK=",
                                        "LOCAL_WORLD_SIZE=",
                                        "MASTER_ADDR=",
                                        "MASTER_PORT=",
                                        "TPCOMM_STORE_PORT=",
                                        "TPCOMM_GROUP_ID=",
                                        "TPCOMM_STORE_SECRET=",
                                        "TPCOMM_STORE_SECRET_FILE="};

// This process's environment without the launch variables (and without TPCOMM_SOCKET_ADDRESS
// when `drop_socket_address`).
std::vector<std::string> environment_without_ours(bool drop_socket_address) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const char* k : kLaunchVariables) replaced |= std::strncmp(*e, k, std::strlen(k)) == 0;
    replaced |= drop_socket_address && std::strncmp(*e, "TPCOMM_SOCKET_ADDRESS=", 22) == 0;
    if (!replaced) env.emplace_back(*e);
  }
  return env;
}

}  // namespace

std::vector<std::string> mpirun_environment(const std::string& node0_address,
                                            const std::string& agent_map) {
  std::vector<std::string> env = environment_without_ours(true);
  env.push_back("TPCOMM_SOCKET_ADDRESS=" + node0_address);
  env.push_back(fmt::format("{}={}", kNodeAgentMapVariable, agent_map));
  env.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
  env.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  return env;
}

std::vector<std::string> rank_environment(int rank, int size, int local_rank, int local_size,
                                          const GroupLaunch& group,
                                          const std::string& socket_address) {
  std::vector<std::string> env = environment_without_ours(!socket_address.empty());
  env.push_back(fmt::format("RANK={}", rank));
  env.push_back(fmt::format("WORLD_SIZE={}", size));
  env.push_back(fmt::format("LOCAL_RANK={}", local_rank));
  env.push_back(fmt::format("LOCAL_WORLD_SIZE={}", local_size));
  env.push_back("MASTER_ADDR=" + group.master_addr);
  if (!socket_address.empty()) env.push_back("TPCOMM_SOCKET_ADDRESS=" + socket_address);
  env.push_back(fmt::format("MASTER_PORT={}", group.torch_port));
  env.push_back(fmt::format("TPCOMM_STORE_PORT={}", group.port));
  env.push_back("TPCOMM_GROUP_ID=" + group.group_id);
  env.push_back("TPCOMM_STORE_SECRET=" + group.secret);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Between fork and exec: only async-signal-safe calls on data prepared before fork.
[[noreturn]] void exec_rank(int out_write, int err_write, const std::vector<std::string>* ns_paths,
                            const std::string& cwd, char** argv, char** envp,
                            const sigset_t& old_mask, const cpu_set_t* cpu) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  dup2(out_write, 1);
  dup2(err_write, 2);
  auto fail = [](const char* what) {
    const char* why = strerror(errno);
    [[maybe_unused]] auto a = write(2, "tpcomm run: ", 12);
    a = write(2, what, strlen(what));
    a = write(2, ": ", 2);
    a = write(2, why, strlen(why));
    a = write(2, "\n", 1);
    _exit(127);
  };
  if (ns_paths != nullptr) {
    for (const auto& path : *ns_paths) {
      int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns(fd, 0) != 0) fail("cannot join the simulated node's namespaces");
      close(fd);
    }
    if (chdir(cwd.c_str()) != 0) fail("cannot return to the working directory");
  }
  if (cpu != nullptr && sched_setaffinity(0, sizeof(*cpu), cpu) != 0) fail("cannot bind to a CPU");
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);  // the launcher ignores it (launcher.cpp); a rank's program may not
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  execvpe(argv[0], argv, envp);
  fail(argv[0]);
  _exit(127);
}

}  // namespace tpcomm::cli
