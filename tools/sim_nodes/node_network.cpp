// Veth pairs, a bridge, rates and loss between simulated nodes (node_network.hpp).
#include "node_network.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <tuple>

#include <fmt/format.h>

#include "node_links.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::cli {
namespace {

constexpr int kCapNetAdmin = 12;
constexpr int kCapSysAdmin = 21;

bool has_capabilities(int a, int b) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long caps = std::stoull(line.substr(7), nullptr, 16);
    return (caps >> a & 1) && (caps >> b & 1);
  }
  return false;
}

int open_netns(pid_t pid) {
  const int fd = open(fmt::format("/proc/{}/ns/net", pid).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("cannot open the network namespace of process {}: {}", pid,
                            std::strerror(errno)));
  }
  return fd;
}

// Runs argv (a path first) in the network namespace `netns_fd`; its output, or nullopt when it
// exited 0. Bounded: a command that has not ended in 20 s is killed.
std::optional<std::string> run_in_netns(int netns_fd, const std::vector<std::string>& argv) {
  std::vector<std::string> strings = argv;
  std::vector<char*> args;
  for (auto& s : strings) args.push_back(s.data());
  args.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return std::string("pipe(): ") + std::strerror(errno);
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls: the launcher may have threads.
    dup2(out[1], 1);
    dup2(out[1], 2);
    if (setns(netns_fd, CLONE_NEWNET) != 0) _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  if (pid < 0) {
    close(out[0]);
    return std::string("fork(): ") + std::strerror(errno);
  }
  std::string output;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pollfd p{out[0], POLLIN, 0};
  while (std::chrono::steady_clock::now() < give_up && poll(&p, 1, 100) >= 0) {
    if (!p.revents) continue;
    char buf[4096];
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n <= 0) break;
    output.append(buf, static_cast<std::size_t>(n));
  }
  close(out[0]);
  kill(pid, SIGKILL);  // nothing when it has ended; a hung `ip` otherwise
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return std::nullopt;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 126) return "cannot enter its namespace";
  return output.empty() ? std::string("failed or did not end within 20 s") : output;
}

}  // namespace

std::optional<LinkFault> parse_link_fault(const std::string& text, LinkFault::Kind kind,
                                          std::string* why) {
  const auto at = text.find('@');
  char* node_end = nullptr;
  char* seconds_end = nullptr;
  const std::string node = text.substr(0, at);
  const std::string seconds = at == std::string::npos ? "" : text.substr(at + 1);
  const long n = std::strtol(node.c_str(), &node_end, 10);
  const double s = std::strtod(seconds.c_str(), &seconds_end);
  if (at == std::string::npos || node.empty() || *node_end != '\0' || n < 0 || seconds.empty() ||
      *seconds_end != '\0' || !(s >= 0 && s <= 86400)) {
    *why = fmt::format(
        "'{}': expected NODE@SECONDS, a node index and the seconds after the ranks start (for "
        "example 1@2.5)",
        text);
    return std::nullopt;
  }
  return LinkFault{kind, static_cast<int>(n),
                   std::chrono::milliseconds(static_cast<long long>(s * 1000))};
}

const char* option_of(LinkFault::Kind kind) {
  return kind == LinkFault::Kind::kCut ? "--link-cut" : "--link-down";
}

const char* effect_of(LinkFault::Kind kind) {
  return kind == LinkFault::Kind::kCut ? "cut off (every packet in and out dropped, silently)"
                                       : "down (the bridge's end of its link set down)";
}

std::optional<std::string> why_no_node_network(const NodeNetworkOptions& options) {
  if (!has_capabilities(kCapSysAdmin, kCapNetAdmin)) {
    return fmt::format(
        "a network namespace per node needs CAP_SYS_ADMIN and CAP_NET_ADMIN (run as root), and "
        "this process (uid {}) lacks them",
        geteuid());
  }
  for (const auto& [program, needed, package] :
       {std::tuple<const char*, bool, const char*>{"ip", true, "iproute2"},
        {"tc", options.rate_bits.has_value(), "iproute2"},
        {"nft",
         options.loss_percent.has_value() ||
             std::any_of(options.faults.begin(), options.faults.end(),
                         [](const LinkFault& f) { return f.kind == LinkFault::Kind::kCut; }),
         "nftables"}}) {
    if (needed && netlinks::find_program(program).empty()) {
      return fmt::format("`{}` is not installed (Debian package {}; scripts/setup.sh installs it)",
                         program, package);
    }
  }
  return std::nullopt;
}

NodeNetwork::NodeNetwork(pid_t hub, const std::vector<pid_t>& nodes,
                         const NodeNetworkOptions& options) {
  hub_fd_ = open_netns(hub);
  std::vector<std::string> refs;
  for (pid_t pid : nodes) {
    node_fds_.push_back(open_netns(pid));
    refs.push_back(std::to_string(pid));  // `ip link ... netns PID`: our pid namespace is ip's
  }
  const std::string ip = netlinks::find_program("ip");
  for (const auto& step : netlinks::bridge_steps(refs)) run(step.where, ip, step.args);
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    if (options.rate_bits) {
      const std::string tc = netlinks::find_program("tc");
      run(i, tc, netlinks::rate_limit_args("eth0", *options.rate_bits));  // what node i sends
      run(netlinks::kHub, tc,
          netlinks::rate_limit_args(fmt::format("v{}", i), *options.rate_bits));  // receives
    }
    if (options.loss_percent) {
      run(i, netlinks::find_program("nft"), {netlinks::random_loss_script(*options.loss_percent)});
    }
  }
}

NodeNetwork::~NodeNetwork() {
  for (int fd : node_fds_) close(fd);
  if (hub_fd_ >= 0) close(hub_fd_);
}

void NodeNetwork::run(int where, const std::string& program,
                      const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), args.begin(), args.end());
  const int fd = where == netlinks::kHub ? hub_fd_ : node_fds_.at(static_cast<std::size_t>(where));
  if (auto failed = run_in_netns(fd, argv)) {
    std::string command;
    for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;
    throw invalid_input(fmt::format(
        "cannot link the simulated nodes: `{}` in {}: {}", command,
        where == netlinks::kHub ? std::string("the hub namespace") : fmt::format("node {}", where),
        *failed));
  }
}

void NodeNetwork::apply(const LinkFault& fault) const {
  if (fault.kind == LinkFault::Kind::kCut) {
    run(fault.node, netlinks::find_program("nft"), {netlinks::isolate_script("tpcomm_cut")});
  } else {
    run(netlinks::kHub, netlinks::find_program("ip"),
        {"link", "set", fmt::format("v{}", fault.node), "down"});
  }
}

void NodeNetwork::in_node(int node, const std::function<void()>& fn) const {
  const int own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (own < 0 || setns(node_fds_.at(static_cast<std::size_t>(node)), CLONE_NEWNET) != 0) {
    const std::string why = std::strerror(errno);
    if (own >= 0) close(own);
    throw Error(ErrorCode::kUnavailable,
                fmt::format("cannot enter node {}'s network namespace: {}", node, why));
  }
  struct Return {
    int fd;
    ~Return() {
      // Staying in the node's namespace would put every later socket of this thread there.
      if (setns(fd, CLONE_NEWNET) != 0) std::abort();
      close(fd);
    }
  } back{own};
  fn();
}

}  // namespace tpcomm::cli
