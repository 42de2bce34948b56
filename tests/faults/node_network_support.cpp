// The node network tests' shared helpers (node_network_support.hpp).
#include "node_network_support.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

namespace tpcomm::test::node_network {

std::string why_not_here(const std::vector<std::string>& programs) {
  if (geteuid() != 0) return "the node network needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)";
  for (const auto& p : programs) {
    if (access(("/usr/sbin/" + p).c_str(), X_OK) != 0 && access(("/sbin/" + p).c_str(), X_OK) != 0)
      return "`" + p + "` is not installed (scripts/setup.sh installs iproute2 and nftables)";
  }
  return "";
}

std::string mark() {
  static int n = 0;
  return "tpcomm-netnode-mark-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

std::map<std::string, std::string> network_namespaces(const std::string& only_with) {
  std::map<std::string, std::string> out;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
      const std::string dir = std::string("/proc/") + e->d_name;
      if (!only_with.empty()) {
        std::ifstream f(dir + "/cmdline");
        std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        if (cmd.find(only_with) == std::string::npos) continue;
      }
      char link[64] = {};
      if (readlink((dir + "/ns/net").c_str(), link, sizeof(link) - 1) > 0) out[e->d_name] = link;
    }
    closedir(d);
  }
  return out;
}

std::vector<std::string> processes_with_environment(const std::string& entry) {
  std::vector<std::string> out;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
      std::ifstream f(std::string("/proc/") + e->d_name + "/environ");
      std::string env((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (("\0" + env).find("\0" + entry + "\0") != std::string::npos ||
          env.rfind(entry + "\0", 0) == 0) {
        out.push_back(e->d_name);
      }
    }
    closedir(d);
  }
  return out;
}

bool none_left_with_environment(const std::string& entry) {
  for (int i = 0; i < 100 && !processes_with_environment(entry).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return processes_with_environment(entry).empty();
}

int processes_in(const std::set<std::string>& namespaces) {
  int n = 0;
  for (const auto& [pid, ns] : network_namespaces()) n += namespaces.count(ns) > 0;
  return n;
}

bool all_gone(const std::set<std::string>& namespaces) {
  for (int i = 0; i < 100 && processes_in(namespaces) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return processes_in(namespaces) == 0;
}

std::vector<std::smatch> matches(const std::string& text, const std::regex& re) {
  std::vector<std::smatch> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it)
    out.push_back(*it);
  return out;
}

}  // namespace tpcomm::test::node_network
