// Slurm's srun launch variables (slurm_environment.hpp).
#include "slurm_environment.hpp"

#include <fmt/format.h>

#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::control {

std::string first_host_of_nodelist(std::string_view list) {
  // The first entry at bracket depth 0.
  int depth = 0;
  std::size_t end = 0;
  while (end < list.size() && !(depth == 0 && list[end] == ',')) {
    if (list[end] == '[') ++depth;
    if (list[end] == ']') --depth;
    ++end;
  }
  const std::string_view entry = list.substr(0, end);
  const std::size_t open = entry.find('[');
  if (open == std::string_view::npos) return std::string(entry);
  const std::size_t close = entry.find(']', open);
  if (close == std::string_view::npos) {
    throw invalid_input(fmt::format("Slurm node list \"{}\": unclosed '['", list));
  }
  // "01-04,07" -> "01": the first number of the first range, zero padding kept.
  std::string_view ranges = entry.substr(open + 1, close - open - 1);
  std::size_t digits = 0;
  while (digits < ranges.size() && ranges[digits] >= '0' && ranges[digits] <= '9') ++digits;
  if (digits == 0) {
    throw invalid_input(fmt::format("Slurm node list \"{}\": no number after '['", list));
  }
  return fmt::format("{}{}{}", entry.substr(0, open), ranges.substr(0, digits),
                     entry.substr(close + 1));
}

std::optional<SlurmLaunch> slurm_launch_from_environment() {
  if (!env_raw("SLURM_PROCID") || !env_raw("SLURM_NTASKS")) return std::nullopt;
  SlurmLaunch s;
  s.rank = static_cast<int>(env_integer("SLURM_PROCID"));
  s.size = static_cast<int>(env_integer("SLURM_NTASKS"));
  auto nodes =
      env_raw("SLURM_STEP_NUM_NODES") ? env_raw("SLURM_STEP_NUM_NODES") : env_raw("SLURM_NNODES");
  s.one_node = nodes && *nodes == "1";
  auto list = env_raw("SLURM_STEP_NODELIST") ? env_raw("SLURM_STEP_NODELIST")
                                             : env_raw("SLURM_JOB_NODELIST");
  if (auto addr = env_raw("MASTER_ADDR")) {
    s.first_host = *addr;
  } else if (list) {
    s.first_host = first_host_of_nodelist(*list);
  } else {
    throw invalid_input(
        "launched by srun (SLURM_PROCID is set) but neither MASTER_ADDR nor SLURM_STEP_NODELIST "
        "names the host of rank 0");
  }
  if (env_raw("MASTER_PORT")) {
    s.port = static_cast<std::uint16_t>(env_integer("MASTER_PORT"));
  } else {
    const std::int64_t job = env_raw("SLURM_JOB_ID") ? env_integer("SLURM_JOB_ID") : 0;
    const std::int64_t step = env_raw("SLURM_STEP_ID") ? env_integer("SLURM_STEP_ID") : 0;
    s.port = static_cast<std::uint16_t>(20000 + (job * 16 + step) % 12000);
  }
  return s;
}

}  // namespace tpcomm::control
