// What tpcomm bench prints and writes: the nccl-tests table row by row, the summary, the
// side-by-side table of --compare, the --plot picture and the --json rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench.hpp"
#include "bench_timing.hpp"

namespace tpcomm::cli {

// --compare deterministic: rounds of the two modes timed in turn, each size.
inline constexpr int kModeRounds = 5;

struct BenchRow {
  std::uint64_t bytes = 0;
  std::size_t count = 0;
  double time_oop = 0, time_ip = 0;  // us per call, out of place and in place (best batch)
  double spread_oop = 0;             // median batch / best batch, out of place
  std::uint64_t wrong_oop = 0, wrong_ip = 0;
  std::string path;  // backend/algorithm of the plan row
  std::optional<Timing> mpi, gloo;
  std::optional<Timing> registered;  // out of place, the input in a registered buffer
  // all_reduce_rmsnorm --compare unfused: all_reduce, then a separate add+norm (bench_norm.hpp)
  std::optional<Timing> unfused;
  // --compare deterministic: the best batch of each of kModeRounds rounds that time the default
  // and deterministic mode in turn, and the deterministic plan row's route
  std::vector<double> default_rounds, deterministic_rounds;
  std::string deterministic_path;
  // Staged calls (hier), us per call averaged over every rank: the whole call, and each stage's
  // share (Communicator::stage_times); empty where the plan stages no call.
  double staged_call_us = 0;
  std::vector<std::pair<std::string, double>> stages_us;
};

// Where the figures came from: in the table's header and in every --json row.
struct BenchSetting {
  int nodes = 1;
  std::string digest;                           // of the plan every rank agreed on
  std::vector<std::string> rank_cpus;           // [r]: the CPUs rank r may run on ("0-3,8")
  std::optional<std::uint64_t> link_rate_bits;  // the simulated nodes' links (--link-rate)
  std::optional<double> link_loss_percent;      // (--link-loss)
};

void print_table_header(const BenchArgs& a, int w, const BenchSetting& setting);
void print_table_row(const BenchArgs& a, int w, const BenchRow& row);
// The closing lines (and the --compare table); then --plot and --json.
void finish_report(const BenchArgs& a, int w, const BenchSetting& setting,
                   const std::vector<BenchRow>& rows, std::uint64_t total_wrong);

}  // namespace tpcomm::cli
