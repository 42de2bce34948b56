// Network namespaces joined by a bridge, with silent cuts (net_namespaces.hpp).
#include "support/net_namespaces.hpp"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <sstream>

#include "support/test_support.hpp"

namespace tpcomm::test {
namespace {

constexpr const char* kNamePrefix = "tpcomm-t";

std::string first_executable(const std::vector<std::string>& paths) {
  for (const auto& p : paths) {
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// Namespaces a test process that no longer exists left behind (it was killed mid-test).
void remove_stale(const std::string& ip) {
  const ProcessResult list = run_process({ip, "netns", "list"}, {}, std::chrono::seconds(20));
  std::istringstream in(list.out);
  for (std::string line; std::getline(in, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.rfind(kNamePrefix, 0) != 0) continue;
    const pid_t owner =
        static_cast<pid_t>(std::atol(name.c_str() + std::string(kNamePrefix).size()));
    if (owner > 0 && kill(owner, 0) != 0 && errno == ESRCH) {
      run_process({ip, "netns", "del", name}, {}, std::chrono::seconds(20));
    }
  }
}

}  // namespace

NetNamespaces::NetNamespaces(std::string ip, std::string nft, std::string prefix, int count)
    : ip_(std::move(ip)), nft_(std::move(nft)), hub_(prefix + "-hub") {
  for (int i = 0; i < count; ++i) names_.push_back(prefix + "-n" + std::to_string(i));
}

std::unique_ptr<NetNamespaces> NetNamespaces::create(int count, std::string* why) {
  if (geteuid() != 0) {
    *why = "network namespaces need root (this test runs as uid " + std::to_string(geteuid()) + ")";
    return nullptr;
  }
  const std::string ip = first_executable({"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"});
  const std::string nft = first_executable({"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"});
  if (ip.empty() || nft.empty()) {
    *why = std::string("`") + (ip.empty() ? "ip" : "nft") +
           "` is not installed (iproute2 / nftables: scripts/setup.sh installs them)";
    return nullptr;
  }
  if (count < 1 || count > 250) {
    *why = "between 1 and 250 namespaces";
    return nullptr;
  }
  remove_stale(ip);
  static int serial = 0;
  const std::string prefix =
      kNamePrefix + std::to_string(getpid()) + "-" + std::to_string(++serial);
  std::unique_ptr<NetNamespaces> net(new NetNamespaces(ip, nft, prefix, count));
  if (!net->make(why)) return nullptr;  // the destructor removes what was made
  return net;
}

bool NetNamespaces::make(std::string* why) {
  std::vector<std::vector<std::string>> steps = {
      {ip_, "netns", "add", hub_},
      {ip_, "-n", hub_, "link", "add", "br0", "type", "bridge"},
      {ip_, "-n", hub_, "link", "set", "br0", "up"}};
  for (int i = 0; i < count(); ++i) {
    const std::string& ns = names_[static_cast<std::size_t>(i)];
    const std::string port = "v" + std::to_string(i);
    steps.push_back({ip_, "netns", "add", ns});
    steps.push_back({ip_, "-n", hub_, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                     "netns", ns});
    steps.push_back({ip_, "-n", hub_, "link", "set", port, "master", "br0", "up"});
    steps.push_back({ip_, "-n", ns, "addr", "add", address(i) + "/24", "dev", "eth0"});
    steps.push_back({ip_, "-n", ns, "link", "set", "eth0", "up"});
    steps.push_back({ip_, "-n", ns, "link", "set", "lo", "up"});
  }
  for (const auto& step : steps) {
    if (!run(step, why)) {
      *why = "cannot make network namespaces here: " + *why;
      return false;
    }
  }
  return true;
}

NetNamespaces::~NetNamespaces() {
  // A namespace lives on while a process is inside it: the tests end theirs first.
  std::string ignored;
  for (const auto& ns : names_) run({ip_, "netns", "del", ns}, &ignored);
  run({ip_, "netns", "del", hub_}, &ignored);
}

std::string NetNamespaces::address(int i) const {
  return "198.18.0." + std::to_string(i + 1);
}

std::vector<std::string> NetNamespaces::inside(int i, const std::vector<std::string>& argv) const {
  std::vector<std::string> out = {ip_, "netns", "exec", name(i)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

bool NetNamespaces::filter(int on, int from, bool drop) {
  const std::string table = "tpcomm_cut_" + std::to_string(from);
  std::string why;
  const bool ok =
      drop ? run(inside(on, {nft_, "add table inet " + table + "; add chain inet " + table +
                                       " input { type filter hook input priority 0; policy "
                                       "accept; }; add rule inet " +
                                       table + " input ip saddr " + address(from) + " drop"}),
                 &why)
           : run(inside(on, {nft_, "delete table inet " + table}), &why);
  EXPECT_TRUE(ok) << why;
  return ok;
}

bool NetNamespaces::cut(int a, int b) {
  return filter(a, b, true) && filter(b, a, true);
}

bool NetNamespaces::heal(int a, int b) {
  return filter(a, b, false) && filter(b, a, false);
}

bool NetNamespaces::run(const std::vector<std::string>& argv, std::string* why) {
  const ProcessResult r = run_process(argv, {}, std::chrono::seconds(20));
  if (r.exit_code == 0) return true;
  std::string command;
  for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;
  *why = command + ": exit " + std::to_string(r.exit_code) + ": " + r.err + r.out;
  return false;
}

}  // namespace tpcomm::test
