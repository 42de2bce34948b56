// tpcomm bench: inside a group it runs the sweep; outside one it starts the group itself —
// under tpcomm run, or under mpirun when MPI is compared.
#include <unistd.h>

#include <memory>

#include <fmt/format.h>

#include "bench/bench.hpp"
#include "bench/bench_mpi.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "launcher/cpu_binding.hpp"
#include "launcher/launcher.hpp"
#include "launcher/mpirun_launch.hpp"
#include "launcher/team_launch.hpp"
#include "sim_nodes/node_links.hpp"
#include "sim_nodes/node_network_cli.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm::cli {
namespace {

// mpirun's --bind-to for the binding `tpcomm run` would give: a core each, or nothing. A thread
// each (more ranks than cores) stays unbound here: mpirun maps ranks to a core's threads in turn,
// not every core's first thread first, so the two launchers would place ranks differently.
// Ranks that may have teams take their shares unbound under mpirun: its --bind-to core gives one
// core each, and an unbound rank's default team shares the machine with the ranks on it.
const char* mpirun_binding(const BenchArgs& a, int threads) {
  if (a.bind_to != "core" || wants_core_shares(threads)) return "none";
  return bind_ranks(usable_cores_here(), a.ranks).level == BindLevel::kCore ? "core" : "none";
}

bool in_group() {
  return env_raw("RANK").has_value() || env_raw("OMPI_COMM_WORLD_RANK").has_value();
}

int run_bench(const BenchArgs& a) {
  if (a.min_bytes == 0 || a.max_bytes < a.min_bytes || a.factor < 2) {
    throw invalid_input("-b, -e, -f: expected 0 < MIN <= MAX and FACTOR >= 2");
  }
  if (a.uneven && a.op != Op::kAllToAll) throw invalid_input("--uneven is for --op all_to_all");
  const bool norm = a.op == Op::kAllReduceRmsNorm;
  if (norm && !a.compare.empty() && a.compare != "unfused") {
    throw invalid_input(
        "--op all_reduce_rmsnorm compares with --compare unfused (tpcomm's all_reduce, then an "
        "add+norm kernel); MPI and Gloo have no such call");
  }
  if (!norm && a.compare == "unfused")
    throw invalid_input("--compare unfused is for --op all_reduce_rmsnorm");
  if (norm && (!is_floating(a.dtype) || a.registered || a.backend == Backend::kLocal)) {
    throw invalid_input(
        "--op all_reduce_rmsnorm: float32, bfloat16 or float16, without --registered");
  }
  if (!is_floating(a.dtype) && a.redop == ReduceOp::kAvg && reduces(a.op)) {
    throw invalid_input(
        fmt::format("--redop avg: avg is for floating-point types, not {}", to_string(a.dtype)));
  }
  // The ranks read it when they create their communicators (the launchers pass the environment).
  if (!a.tuning.empty()) setenv("TPCOMM_TUNING", a.tuning.c_str(), 1);
  if (in_group()) return run_bench_in_group(a);
  const int threads = apply_threads_option(a.threads, a.ranks, a.bind_to == "core");
  auto argv = bench_argv(a, self_executable());
  const bool with_mpi = a.compare.find("mpi") != std::string::npos;
  if (with_mpi) {
    if (auto why = mpi_refusal(a.op, a.dtype, a.redop, a.max_bytes)) throw *why;
  }
  LaunchOptions l;
  l.ranks = a.ranks;
  l.nodes = a.nodes;
  l.command = argv;
  l.prefix_output = false;
  l.bind_cores = a.bind_to == "core";
  l.core_shares = wants_core_shares(threads);
  l.node_network = a.node_network;
  // MPI's own rows need ranks that mpirun started; so does hier_mpi.
  if (with_mpi || a.launch == "mpirun") {
    return launch_under_mpirun(l, self_executable(), mpirun_binding(a, threads));
  }
  return launch(l);
}

}  // namespace

// The backends of host-memory groups, the ones the bench can force.
std::vector<std::string> cpu_backend_names() {
  std::vector<std::string> names;
  for (Backend b : backends_of(DeviceType::kCpu)) names.emplace_back(to_string(b));
  return names;
}

void add_bench_command(CLI::App& app, int& exit_status) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Time collectives over a sweep of sizes: the nccl-tests table, optionally against "
      "Open MPI and Gloo in the same run");
  cmd->add_option("-n,--ranks", a->ranks, "ranks to start when not already in a group")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--nodes", a->nodes, "simulated nodes (as tpcomm run --nodes)")
      ->capture_default_str();
  add_node_network_options(*cmd, a->node_network, false);
  add_enum_option(cmd, "--op", a->op, "the collective");
  add_enum_option(cmd, "--dtype", a->dtype, "the element type");
  add_enum_option(cmd, "--redop", a->redop, "the reduction");
  add_size_option(cmd, "-b,--minbytes", a->min_bytes, "smallest size");
  add_size_option(cmd, "-e,--maxbytes", a->max_bytes, "largest size");
  cmd->add_option("-f,--stepfactor", a->factor, "size multiplier between rows")
      ->capture_default_str();
  cmd->add_option("--iters", a->iters,
                  "timed calls per size; 0: as many as fit in 25 ms (at least 21)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--warmup", a->warmup, "untimed calls first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_flag("--check", a->check, "check every result on real data (the #wrong columns)");
  cmd->add_flag("--uneven", a->uneven,
                "all_to_all: all_to_allv with the counts of a seeded mixture-of-experts router "
                "(8 experts, 2 per token, seed 0; a size is a rank's dispatch when every token "
                "went out twice)");
  cmd->add_option("--hidden", a->hidden,
                  "--uneven, --op all_reduce_rmsnorm: elements per token row")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option_function<std::string>(
         "--backend", [a](const std::string& v) { a->backend = from_string<Backend>(v); },
         "force this backend (the others are disabled)")
      ->check(CLI::IsMember(cpu_backend_names()));
  cmd->add_option("--compare", a->compare,
                  "also time these engines on the same data: mpi, gloo or mpi,gloo; unfused "
                  "(--op all_reduce_rmsnorm): all_reduce, then a separate add+norm kernel; "
                  "deterministic: the same calls in deterministic mode")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v == "mpi" || v == "gloo" || v == "mpi,gloo" || v == "gloo,mpi" ||
                           v == "unfused" || v == "deterministic"
                       ? std::string()
                       : "expected mpi, gloo, mpi,gloo, unfused or deterministic, got '" + v + "'";
          },
          "ENGINES"));
  cmd->add_option("--launch", a->launch,
                  "who starts the ranks: tpcomm, or mpirun (they bootstrap through MPI, so a group "
                  "across nodes runs hier_mpi; implied by --compare mpi)")
      ->check(CLI::IsMember({"tpcomm", "mpirun"}))
      ->capture_default_str();
  cmd->add_option("--json", a->json, "write every row to this file");
  cmd->add_flag(
      "--registered", a->registered,
      "also time each size with the input in a registered buffer (Communicator::allocate; "
      "a column of its own in the comparison table)");
  cmd->add_option("--tuning", a->tuning,
                  "tuning file for the plan (as TPCOMM_TUNING), e.g. one tpcomm tune wrote");
  cmd->add_option("--plot", a->plot,
                  "draw latency and bus bandwidth per engine into this PNG (gnuplot)");
  cmd->add_option(
         "--bind-to", a->bind_to,
         "core: each rank on a core of its own, as mpirun --bind-to core (tpcomm's launch: "
         "a hardware thread of its own when cores are fewer)")
      ->check(CLI::IsMember({"core", "none"}))
      ->capture_default_str();
  add_threads_option(cmd, a->threads);
  cmd->callback([a, &exit_status] { exit_status = run_bench(*a); });
}

}  // namespace tpcomm::cli
