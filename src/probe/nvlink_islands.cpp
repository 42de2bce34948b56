// NVLink islands by union-find over GPUs, with one extra node standing for the NVSwitch fabric.
#include "nvlink_islands.hpp"

#include <cctype>
#include <cstdio>
#include <map>
#include <numeric>

namespace tpcomm::probe {

std::string normalize_bus_id(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) == 4) {
    char out[32];
    std::snprintf(out, sizeof(out), "%04x:%02x:%02x.%x", domain, bus, device, function);
    return out;
  }
  std::string lower = bus_id;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

std::vector<std::optional<int>> nvlink_islands(const std::vector<GpuLinks>& gpus) {
  const std::size_t n = gpus.size();
  const std::size_t switch_node = n;
  std::vector<std::size_t> parent(n + 1);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](std::size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  auto unite = [&](std::size_t a, std::size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  };
  std::map<std::string, std::size_t> by_bus;
  for (std::size_t i = 0; i < n; ++i) by_bus[normalize_bus_id(gpus[i].bus_id)] = i;
  for (std::size_t i = 0; i < n; ++i) {
    for (const auto& link : gpus[i].links) {
      if (link.peer == LinkPeer::kSwitch) {
        unite(i, switch_node);
      } else if (link.peer == LinkPeer::kGpu) {
        auto it = by_bus.find(normalize_bus_id(link.remote_bus_id));
        if (it != by_bus.end()) unite(i, it->second);  // a peer outside CUDA_VISIBLE_DEVICES
      }
    }
  }
  std::vector<std::optional<int>> island(n);
  std::map<std::size_t, int> number;
  for (std::size_t i = 0; i < n; ++i) {
    if (gpus[i].links.empty()) continue;
    auto root = find(i);
    auto it = number.find(root);
    if (it == number.end()) it = number.emplace(root, static_cast<int>(number.size())).first;
    island[i] = it->second;
  }
  return island;
}

}  // namespace tpcomm::probe
