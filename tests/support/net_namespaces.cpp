// Network namespaces joined by a bridge, with silent cuts (net_namespaces.hpp).
#include "support/net_namespaces.hpp"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <sstream>

#include "sim_nodes/node_links.hpp"
#include "support/test_support.hpp"

namespace tpcomm::test {
namespace {

constexpr const char* kNamePrefix = "tpcomm-t";

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
  const std::string ip = netlinks::find_program("ip");
  const std::string nft = netlinks::find_program("nft");
  if (ip.empty() || nft.empty()) {
    *why = std::string("`") + (ip.empty() ? "ip" : "nft") +
           "` is not installed (iproute2 / nftables: scripts/setup.sh installs them)";
    return nullptr;
  }
  if (count < 1 || count > netlinks::kMaxNodes) {
    *why = "between 1 and " + std::to_string(netlinks::kMaxNodes) + " namespaces";
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

// Named namespaces (`ip netns add`), linked by the same steps as tpcomm run --nodes uses.
bool NetNamespaces::make(std::string* why) {
  std::vector<std::vector<std::string>> steps = {{ip_, "netns", "add", hub_}};
  for (const auto& ns : names_) steps.push_back({ip_, "netns", "add", ns});
  for (const auto& step : netlinks::bridge_steps(names_)) {
    std::vector<std::string> argv = {ip_, "-n",
                                     step.where == netlinks::kHub ? hub_ : name(step.where)};
    argv.insert(argv.end(), step.args.begin(), step.args.end());
    steps.push_back(argv);
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
  return netlinks::node_address(i);
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
      drop ? run(inside(on, {nft_, netlinks::drop_from_script(table, address(from))}), &why)
           : run(inside(on, {nft_, netlinks::delete_table_script(table)}), &why);
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
