// CPU facts: the ISA features that matter to reduction kernels, and the NUMA node we run on.
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "probe_parts.hpp"

namespace tpcomm::probe {

// x86 names as in /proc/cpuinfo "flags", Arm names as in "Features".
const std::vector<std::string>& relevant_isa_features() {
  static const std::vector<std::string> features = {
      "sse4_2",   "avx",      "avx2",        "fma",         "f16c",     "avx512f",
      "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
      "asimd",    "asimdhp",  "sve",         "sve2",        "bf16"};
  return features;
}

std::vector<std::string> isa_from_cpuinfo(const std::string& cpuinfo) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    std::vector<std::string> present;
    std::string w;
    while (words >> w) present.push_back(w);
    std::vector<std::string> out;
    for (const auto& f : relevant_isa_features()) {
      if (std::find(present.begin(), present.end(), f) != present.end()) out.push_back(f);
    }
    return out;  // the first CPU's flags stand for all (a host's cores share an ISA)
  }
  return {};
}

std::vector<std::string> probe_cpu_isa() {
  std::ifstream f("/proc/cpuinfo");
  std::stringstream text;
  text << f.rdbuf();
  return isa_from_cpuinfo(text.str());
}

std::optional<int> probe_numa_node() {
  unsigned cpu = 0;
  unsigned node = 0;
  if (getcpu(&cpu, &node) != 0) return std::nullopt;
  return static_cast<int>(node);
}

}  // namespace tpcomm::probe
