// tpcomm topo: this machine's facts, for people or as a facts-v1 document.
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "commands.hpp"
#include "kernels/cpu/reduce.hpp"
#include "report/machine_text.hpp"
#include "report/numa_map.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/facts_json.hpp"
#include "tpcomm/probe.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm::cli {
namespace {

struct TopoArgs {
  bool json = false;
  int ranks = 1;
  std::optional<DeviceType> device;  // nullopt: cuda when a device was found, else cpu
};

std::string yes_no(bool b) {
  return b ? "yes" : "no";
}

// The reduction variants this CPU can run, best first (each is tested and benchmarked by name).
std::string runnable_kernel_variants() {
  std::string out;
  for (kernels::cpu::KernelIsa isa : kernels::cpu::kAllKernelIsas) {
    if (!kernels::cpu::cpu_runs(isa)) continue;
    out += (out.empty() ? "" : ", ") + std::string(kernels::cpu::to_string(isa));
  }
  return out;
}

void print_human(const LocalFacts& f, int ranks) {
  std::cout << fmt::format("host    {} (boot id {})\n", f.host.hostname,
                           f.host.boot_id.empty() ? "unknown" : f.host.boot_id);
  std::cout << fmt::format(
      "cpu     {}, numa node {}, isa: {}\n", cpu_model(),
      f.numa ? fmt::format("{}", *f.numa) : "unknown",
      f.cpu_isa.empty() ? "none of interest" : fmt::format("{}", fmt::join(f.cpu_isa, " ")));
  // What --bind-to core hands out, and whether ranks on "different CPUs" would share a core.
  std::cout << fmt::format("cores   {}\n", cores_text(usable_cores_here()));
  std::cout << fmt::format("numa    {}\n", numa_nodes_text());
  // Where a group's ranks, their pages and their teams would be (tpcomm run --bind-to core).
  const int threads = static_cast<int>(env_integer("TPCOMM_THREADS"));
  std::cout << fmt::format("group   {} ranks with --bind-to core, TPCOMM_THREADS={}:\n{}", ranks,
                           threads, group_node_map(ranks, threads));
  std::cout << fmt::format("kernels shm reductions: {} (this CPU runs {})\n",
                           transport::cpu::kernel_isa(), runnable_kernel_variants());
  std::cout << fmt::format("cuda    {}\n", f.cuda_status);
  std::cout << fmt::format("nvml    {}\n", f.nvml_status);
  if (f.gpus.empty()) return;
  std::cout << "\n  gpu  sm   island  p2p  multicast  vmm  fabric_handle  fabric           numa\n";
  for (const auto& g : f.gpus) {
    std::string fabric = "unknown";
    if (g.fabric) {
      fabric = std::string(to_string(g.fabric->state));
      if (g.fabric->clique_id) fabric += fmt::format(" clique {}", *g.fabric->clique_id);
    }
    std::cout << fmt::format(
        "  {}  {}  {}  {}  {}  {}  {}  {}  {}\n", pad(fmt::format("{}", g.index.value_or(-1)), 3),
        pad(fmt::format("{}", g.sm.value_or(0)), 3),
        pad(g.nvlink_island ? fmt::format("{}", *g.nvlink_island) : "-", 6), pad(yes_no(g.p2p), 3),
        pad(yes_no(g.multicast), 9), pad(yes_no(g.vmm), 3), pad(yes_no(g.fabric_handle), 13),
        pad(fabric, 15), g.numa ? fmt::format("{}", *g.numa) : "-");
  }
}

void run_topo(const TopoArgs& args) {
  LocalFacts local = probe_local();
  if (!args.json) {
    print_human(local, args.ranks);
    return;
  }
  const DeviceType type =
      args.device.value_or(local.gpus.empty() ? DeviceType::kCpu : DeviceType::kCuda);
  std::cout << encode_facts(local_facts_table(local, args.ranks, type));
}

}  // namespace

void add_topo_command(CLI::App& app) {
  auto args = std::make_shared<TopoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "topo", "Probe this machine (host, CPU, CUDA devices, NVLink, fabric) and print its facts");
  cmd->add_flag("--json", args->json,
                "print a facts-v1 document that tpcomm plan reads (docs/facts.md)");
  cmd->add_option("--ranks", args->ranks,
                  "ranks on this machine: the group's node map (each rank's CPUs, node and team); "
                  "with --json, the ranks the facts describe")
      ->check(CLI::Range(1, kMaxRanks))
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--device", [args](const std::string& v) { args->device = from_string<DeviceType>(v); },
         "with --json: cuda or cpu ranks (default: cuda when a CUDA device is found)")
      ->check(CLI::IsMember(names_of<DeviceType>()));
  cmd->callback([args] { run_topo(*args); });
}

}  // namespace tpcomm::cli
