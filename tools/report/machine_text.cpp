// This machine in words (machine_text.hpp).
#include "machine_text.hpp"

#include <fstream>

#include <fmt/format.h>

#include "kernels/cpu/reduce.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm::cli {
namespace {

std::size_t thread_count(const CoreThreads& cores) {
  std::size_t threads = 0;
  for (const auto& c : cores) threads += c.size();
  return threads;
}

std::string threads_text(const CoreThreads& cores) {
  const std::size_t threads = thread_count(cores);
  return threads == cores.size() ? "a hardware thread each"
                                 : fmt::format("{} hardware threads", threads);
}

}  // namespace

std::string cpu_model() {
  // VMs often show only the brand ("AMD EPYC"), so the family and model numbers come along.
  std::string name, family, model;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line) && !line.empty();) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto key_end = line.find_last_not_of(" \t", colon - 1);
    const std::string key = line.substr(0, key_end == std::string::npos ? 0 : key_end + 1);
    const auto start = line.find_first_not_of(" \t", colon + 1);
    const std::string value = start == std::string::npos ? "" : line.substr(start);
    if (key == "model name") name = value;
    if (key == "cpu family") family = value;
    if (key == "model") model = value;
  }
  if (name.empty()) return "unknown CPU";
  return family.empty() || model.empty()
             ? name
             : fmt::format("{} (family {} model {})", name, family, model);
}

std::string cores_text(const CoreThreads& cores) {
  return fmt::format("{} usable, {}: {}", cores.size(), threads_text(cores), describe_cores(cores));
}

std::string machine_summary() {
  const CoreThreads cores = usable_cores_here();
  return fmt::format("{}, shm kernels {}, {} cores ({})", cpu_model(), transport::cpu::kernel_isa(),
                     cores.size(), threads_text(cores));
}

}  // namespace tpcomm::cli
