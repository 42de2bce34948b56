// The launcher's process management: fork/exec of the ranks (everything the child needs is
// prepared before fork, since the parent has threads), one poll loop over the ranks' output
// pipes and a signalfd for SIGCHLD, SIGINT, SIGTERM and SIGHUP, and the stop sequence.
#include "launcher.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "common/segment_names.hpp"
#include "control/store_auth.hpp"
#include "cpu_binding.hpp"
#include "group_launch.hpp"
#include "mpirun_over_nodes.hpp"
#include "orphan_reaper.hpp"
#include "rank_process.hpp"
#include "sim_nodes/link_fault_schedule.hpp"
#include "sim_nodes/node_links.hpp"
#include "sim_nodes/sim_nodes.hpp"
#include "tpcomm/deadline.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Rank {
  int index = 0;
  pid_t pid = -1;
  int out = -1;
  int err = -1;
  std::string out_partial;
  std::string err_partial;
  bool running = false;
  int status = 0;
};

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
  }
  return "ended";
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& o) : options_(o) {}
  int run();

 private:
  void start_ranks(const GroupLaunch& group, SimulatedNodes* nodes, const sigset_t& old_mask);
  void pump(Rank& r, int fd, std::string& partial, std::ostream& sink);
  std::string prefix(const Rank& r) const {
    return options_.prefix_output ? fmt::format("[{}] ", r.index) : std::string();
  }
  void reap();
  void stop_all(int signal_number, const std::string& cause);
  int running() const;
  // Every rank has ended: true once their output is all read, or half a second later when
  // something they started still holds it open (then stopped, so the launcher returns).
  bool output_done(std::size_t open_pipes);
  void remove_segments_of_ranks() const;
  void report_cause();

  LaunchOptions options_;
  std::vector<Rank> ranks_;
  std::optional<std::string> cause_;  // why the group is being stopped
  std::optional<std::string> first_failure_;
  int exit_code_ = 0;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> keep_going_until_;
  std::optional<Clock::time_point> all_ended_at_;
};

bool Launcher::output_done(std::size_t open_pipes) {
  if (open_pipes == 0) return true;
  const auto now = Clock::now();
  if (!all_ended_at_) all_ended_at_ = now;
  if (now - *all_ended_at_ < std::chrono::milliseconds(500)) return false;
  for (auto& r : ranks_) {
    kill(-r.pid, SIGKILL);  // what a rank left running in its process group
    for (int* fd : {&r.out, &r.err}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
  }
  return true;
}

void Launcher::start_ranks(const GroupLaunch& group, SimulatedNodes* nodes,
                           const sigset_t& old_mask) {
  char cwd_buf[4096];
  const std::string cwd = getcwd(cwd_buf, sizeof(cwd_buf)) ? cwd_buf : "/";
  std::vector<std::string> argv_strings = options_.command;
  std::vector<char*> argv = pointers(argv_strings);
  const bool mpirun = options_.mpirun_over_nodes;
  if (mpirun && !(nodes && nodes->network())) {
    throw invalid_input("mpirun over simulated nodes needs their network (--node-network on)");
  }
  const int n = mpirun ? 1 : options_.ranks;  // mpirun starts the ranks
  const std::vector<cpu_set_t> cpus =
      options_.bind_cores ? bind_ranks(usable_cores_here(), n, options_.core_shares).cpus
                          : std::vector<cpu_set_t>();
  for (int r = 0; r < n; ++r) {
    const int node = static_cast<int>(static_cast<long>(r) * options_.nodes / n);
    int first = 0, count = 0;
    for (int q = 0; q < n; ++q) {
      if (static_cast<int>(static_cast<long>(q) * options_.nodes / n) != node) continue;
      if (count++ == 0) first = q;
    }
    const bool linked = nodes && nodes->network();
    auto env_strings = mpirun ? mpirun_environment(netlinks::node_address(0),
                                                   node_agent_map(*nodes, options_.nodes))
                              : rank_environment(r, n, r - first, count, group,
                                                 linked ? netlinks::node_address(node) : "");
    auto envp = pointers(env_strings);
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      throw Error(ErrorCode::kUnavailable, "pipe(): " + std::string(std::strerror(errno)));
    }
    Rank rank;
    rank.index = r;
    const std::vector<std::string>* ns = nodes ? &nodes->namespace_paths(node) : nullptr;
    pid_t pid = fork();
    if (pid == 0) {
      exec_rank(out[1], err[1], ns, cwd, argv.data(), envp.data(), old_mask,
                cpus.empty() ? nullptr : &cpus[static_cast<std::size_t>(r)]);
    }
    if (pid < 0)
      throw Error(ErrorCode::kUnavailable, "fork(): " + std::string(std::strerror(errno)));
    setpgid(pid, pid);
    close(out[1]);
    close(err[1]);
    rank.pid = pid;
    rank.out = out[0];
    rank.err = err[0];
    rank.running = true;
    ranks_.push_back(rank);
  }
}

// A line goes on when its newline comes, or in pieces of kLinePiece bytes, each a line of its own,
// while none comes: a rank writing without newlines cannot grow the launcher's memory.
constexpr std::size_t kLinePiece = std::size_t{64} << 10;

void Launcher::pump(Rank& r, int fd, std::string& partial, std::ostream& sink) {
  char buf[65536];
  ssize_t n = read(fd, buf, sizeof(buf));
  if (n <= 0) {
    if (!partial.empty()) sink << prefix(r) << partial << "\n" << std::flush;
    partial.clear();
    close(fd);
    (fd == r.out ? r.out : r.err) = -1;
    return;
  }
  partial.append(buf, static_cast<std::size_t>(n));
  const std::string_view text(partial);
  std::size_t start = 0;
  while (true) {
    const std::size_t nl = text.find('\n', start);
    if (nl != std::string_view::npos && nl - start <= kLinePiece) {
      sink << prefix(r) << text.substr(start, nl - start) << "\n";
      start = nl + 1;
    } else if (text.size() - start > kLinePiece) {
      sink << prefix(r) << text.substr(start, kLinePiece) << "\n";
      start += kLinePiece;
    } else {
      break;
    }
  }
  sink << std::flush;
  partial.erase(0, start);
}

int Launcher::running() const {
  int count = 0;
  for (const auto& r : ranks_) count += r.running;
  return count;
}

void Launcher::stop_all(int signal_number, const std::string& cause) {
  if (!cause_) cause_ = cause;
  for (const auto& r : ranks_) {
    if (r.running) kill(-r.pid, signal_number);
  }
  if (!kill_at_) {
    kill_at_ = Clock::now() + std::chrono::milliseconds(static_cast<long>(options_.grace_s * 1000));
  }
}

void Launcher::reap() {
  int status = 0;
  pid_t pid;
  // Also what the ranks left behind, re-parented here (orphan_reaper.hpp) when it ends: no
  // zombies, and only a rank's own pid counts as a rank ending.
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (auto& r : ranks_) {
      if (r.pid != pid || !r.running) continue;
      r.running = false;
      r.status = status;
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && !cause_ && !first_failure_) {
        exit_code_ = exit_code_of(status);
        first_failure_ = fmt::format("rank {} {}", r.index, describe_status(status));
        if (!options_.keep_going) {
          stop_all(SIGTERM, *first_failure_);
        } else {
          // The others end on their own within their deadline; a rank that cannot (stopped,
          // hung outside tpcomm) is stopped after it, so --keep-going never hangs.
          keep_going_until_ = Clock::now() + default_timeout() + std::chrono::seconds(2);
        }
      }
    }
  }
}

// tpcomm names its /dev/shm segments tpcomm-<kind>-<pid>-...; a rank killed before it could
// unlink its own leaves them: remove them once every rank has ended. (Simulated nodes' private
// /dev/shm ended with their namespaces.)
void Launcher::remove_segments_of_ranks() const {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind("tpcomm-", 0) != 0) continue;
    for (const auto& r : ranks_) {
      const std::string pid_part = fmt::format("-{}-", r.pid);
      const auto kind_end = name.find('-', 7);
      if (kind_end != std::string::npos && name.compare(kind_end, pid_part.size(), pid_part) == 0) {
        if (shm_unlink(("/" + name).c_str()) == 0) {
          std::cerr << fmt::format("tpcomm run: removed /dev/shm/{} left by rank {} ({})\n", name,
                                   r.index, describe_status(r.status));
        }
      }
    }
  }
  closedir(dir);
}

// SIGCHLD, SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) arrive through a
// signalfd in the poll loop: the group is stopped with a summary, nothing left behind.
int signals_to_fd(sigset_t& old_mask) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

int Launcher::run() {
  // A reader of our output that goes away (`tpcomm run ... | head -1`) must not end the launcher:
  // the ranks (and mpirun's daemons on every node) would be left without anyone to stop them.
  // Writes then fail, the output is dropped, and the group is supervised to its end.
  signal(SIGPIPE, SIG_IGN);
  sigset_t old_mask;
  int sfd = signals_to_fd(old_mask);
  // What the ranks start and leave (setsid, a daemon's double fork) becomes ours to stop once
  // they have ended; children this process had before are not.
  const std::vector<pid_t> children_before = children_of_this_process();
  become_subreaper();

  // Segments of ranks that died with an earlier launcher (kill -9 of `tpcomm run` kills its ranks
  // through PR_SET_PDEATHSIG, which no process can clean up after) go now.
  common::remove_stale_segments();
  std::unique_ptr<SimulatedNodes> nodes =
      start_simulated_nodes(options_.nodes, options_.node_network);
  GroupLaunch group;
  auto store = serve_new_group(group, nodes.get());
  start_ranks(group, nodes.get(), old_mask);
  const auto started = Clock::now();
  LinkFaultSchedule faults(options_.node_network.faults, nodes ? nodes->network() : nullptr);

  while (true) {
    std::vector<pollfd> fds{{sfd, POLLIN, 0}};
    for (const auto& r : ranks_) {
      if (r.out >= 0) fds.push_back({r.out, POLLIN, 0});
      if (r.err >= 0) fds.push_back({r.err, POLLIN, 0});
    }
    if (running() == 0 && output_done(fds.size() - 1)) break;
    poll(fds.data(), fds.size(), 100);
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      for (auto& r : ranks_) {
        if (fds[i].fd == r.out) {
          pump(r, r.out, r.out_partial, std::cout);
        } else if (fds[i].fd == r.err) {
          pump(r, r.err, r.err_partial, std::cerr);
        }
      }
    }
    signalfd_siginfo info;
    while (read(sfd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      if (info.ssi_signo == SIGINT || info.ssi_signo == SIGTERM || info.ssi_signo == SIGHUP) {
        if (!cause_) exit_code_ = 128 + static_cast<int>(info.ssi_signo);
        stop_all(static_cast<int>(info.ssi_signo),
                 fmt::format("interrupted by {}", strsignal(static_cast<int>(info.ssi_signo))));
      }
    }
    reap();
    const auto now = Clock::now();
    if (auto failed = faults.apply_due(now - started); failed && !cause_) {
      exit_code_ = 2;
      stop_all(SIGTERM, *failed);
    }
    if (options_.timeout_s && !cause_ &&
        now - started > std::chrono::milliseconds(static_cast<long>(*options_.timeout_s * 1000))) {
      exit_code_ = 124;
      stop_all(SIGTERM, fmt::format("the job ran past --timeout {} s", *options_.timeout_s));
    }
    if (keep_going_until_ && now >= *keep_going_until_ && !cause_) {
      stop_all(SIGTERM,
               *first_failure_ + "; the others did not end within TPCOMM_TIMEOUT_MS + 2 s");
    }
    if (kill_at_ && now >= *kill_at_) {
      for (const auto& r : ranks_) {
        if (r.running) kill(-r.pid, SIGKILL);
      }
    }
  }
  nodes.reset();
  close(sfd);
  stop_what_the_ranks_left(children_before);
  remove_segments_of_ranks();
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  report_cause();
  return exit_code_;
}

void Launcher::report_cause() {
  if (!cause_ && first_failure_) cause_ = *first_failure_ + " (--keep-going: the others ran on)";
  if (!cause_) return;
  std::vector<std::string> others;
  for (const auto& r : ranks_) {
    if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)) {
      others.push_back(fmt::format("rank {} {}", r.index, describe_status(r.status)));
    }
  }
  std::cerr << fmt::format("tpcomm run: {}; stopped the group ({})\n", *cause_,
                           fmt::join(others, ", "));
}

}  // namespace

int launch(const LaunchOptions& options) {
  if (options.command.empty())
    throw invalid_input("tpcomm run: no program given (tpcomm run -n N -- PROGRAM ARGS...)");
  if (options.ranks < 1)
    throw invalid_input(fmt::format("-n {}: expected at least one rank", options.ranks));
  if (options.nodes < 1 || options.nodes > options.ranks) {
    throw invalid_input(fmt::format("--nodes {}: expected 1 to the number of ranks ({})",
                                    options.nodes, options.ranks));
  }
  return Launcher(options).run();
}

}  // namespace tpcomm::cli
