// Addresses, bridge steps and nftables / tc texts for simulated hosts (node_links.hpp).
#include "node_links.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace tpcomm::netlinks {

std::string node_address(int node) {
  return fmt::format("198.18.0.{}", node + 1);
}

std::string find_program(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string path = dir + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::vector<IpStep> bridge_steps(const std::vector<std::string>& node_refs) {
  std::vector<IpStep> steps = {{kHub, {"link", "add", "br0", "type", "bridge"}},
                               {kHub, {"link", "set", "br0", "up"}}};
  for (int i = 0; i < static_cast<int>(node_refs.size()); ++i) {
    const std::string port = fmt::format("v{}", i);
    steps.push_back({kHub,
                     {"link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
                      node_refs[static_cast<std::size_t>(i)]}});
    steps.push_back({kHub, {"link", "set", port, "master", "br0", "up"}});
    steps.push_back(
        {i, {"addr", "add", fmt::format("{}/{}", node_address(i), kPrefixLength), "dev", "eth0"}});
    steps.push_back({i, {"link", "set", "eth0", "up"}});
    steps.push_back({i, {"link", "set", "lo", "up"}});
  }
  return steps;
}

namespace {

std::string input_chain(const std::string& table, const std::string& rule) {
  return fmt::format(
      "add table inet {0}; add chain inet {0} input {{ type filter hook input priority 0; policy "
      "accept; }}; add rule inet {0} input {1}",
      table, rule);
}

}  // namespace

std::string drop_from_script(const std::string& table, const std::string& address) {
  return input_chain(table, "ip saddr " + address + " drop");
}

std::string isolate_script(const std::string& table) {
  return fmt::format(
      "{}; add chain inet {} output {{ type filter hook output priority 0; policy accept; }}; add "
      "rule inet {} output oifname \"eth0\" drop",
      input_chain(table, "iifname \"eth0\" drop"), table, table);
}

std::string delete_table_script(const std::string& table) {
  return "delete table inet " + table;
}

std::string random_loss_script(double percent) {
  const long in_10000 = std::lround(percent * 100);
  return input_chain("tpcomm_loss",
                     fmt::format("iifname \"eth0\" numgen random mod 10000 < {} drop", in_10000));
}

std::optional<std::uint64_t> parse_rate(const std::string& text, std::string* why) {
  std::size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  std::string unit = text.substr(digits);
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const double scale = unit == "bit"    ? 1
                       : unit == "kbit" ? 1e3
                       : unit == "mbit" ? 1e6
                       : unit == "gbit" ? 1e9
                                        : 0;
  char* end = nullptr;
  const std::string number = text.substr(0, digits);
  const double value = std::strtod(number.c_str(), &end);
  const double bits = value * scale;
  if (digits == 0 || end != number.c_str() + number.size() || scale == 0 || bits < 8000 ||
      bits > 1e12) {
    *why = fmt::format(
        "'{}': expected a rate from 8kbit to 1000gbit, a number with the unit bit, kbit, mbit or "
        "gbit (for example 100mbit or 2.5gbit)",
        text);
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(bits);
}

std::vector<std::string> rate_limit_args(const std::string& device, std::uint64_t bits_per_s) {
  const std::uint64_t burst =
      std::max<std::uint64_t>(bits_per_s / 8 / 100, std::uint64_t{64} * 1024);
  return {"qdisc",   "replace",
          "dev",     device,
          "root",    "tbf",
          "rate",    fmt::format("{}bit", bits_per_s),
          "burst",   fmt::format("{}", burst),
          "latency", "50ms"};
}

}  // namespace tpcomm::netlinks
