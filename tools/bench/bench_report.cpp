// The output of tpcomm bench (bench_report.hpp).
#include "bench_report.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_data.hpp"
#include "bench_plot.hpp"
#include "kernels/cpu/reduce.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm::cli {
namespace {

double busbw(const BenchArgs& a, int w, std::uint64_t bytes, double us) {
  return static_cast<double>(bytes) / us / 1e3 * bus_factor(a.op, w);
}

// all_reduce_rmsnorm: the fused call against all_reduce + a separate add+norm kernel.
void print_norm_comparison(const BenchArgs& a, const std::vector<BenchRow>& rows) {
  std::cout << fmt::format(
      "#\n# Fused against unfused (tpcomm all_reduce, then an add+norm kernel of the same ISA), "
      "rows of {}, out of place: time (us, best batch) and spread (median batch / best)\n",
      a.hidden);
  std::cout << fmt::format("# {:>10} {:>6}   {:>9} {:>6}   {:>9} {:>6}   {:>11}\n", "size", "rows",
                           "fused", "spread", "unfused", "spread", "fused/unf.");
  for (const auto& r : rows) {
    if (!r.unfused) continue;
    std::cout << fmt::format(
        "  {:>10} {:>6}   {:>9.2f} {:>6.2f}   {:>9.2f} {:>6.2f}   {:>10.2f}x\n", r.bytes,
        r.count / a.hidden, r.time_oop, r.spread_oop, r.unfused->best, r.unfused->spread(),
        r.time_oop / r.unfused->best);
  }
}

// --compare deterministic: the default mode against deterministic mode, the same calls on two
// communicators of one process, timed in turn kModeRounds times at each size: the median (and
// range) of the rounds' best batches.
void print_deterministic_comparison(const std::vector<BenchRow>& rows) {
  std::cout << fmt::format(
      "#\n# Default against deterministic mode (every reduction in rank order), out of place, "
      "{} rounds timing the two in turn: median of the rounds' best batch (us) and range\n",
      kModeRounds);
  std::cout << fmt::format("# {:>10}   {:>9} {:>17}   {:>13} {:>17}   {:>9}  {}\n", "size",
                           "default", "range", "deterministic", "range", "det./def.",
                           "deterministic route");
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto range = [](const std::vector<double>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return fmt::format("{:.2f}-{:.2f}", *lo, *hi);
  };
  for (const auto& r : rows) {
    if (r.default_rounds.empty()) continue;
    const double d = median(r.default_rounds), m = median(r.deterministic_rounds);
    std::cout << fmt::format("  {:>10}   {:>9.2f} {:>17}   {:>13.2f} {:>17}   {:>8.2f}x  {}\n",
                             r.bytes, d, range(r.default_rounds), m, range(r.deterministic_rounds),
                             m / d, r.deterministic_path);
  }
}

void print_comparison(const BenchArgs& a, int w, const std::vector<BenchRow>& rows) {
  if (a.op == Op::kAllReduceRmsNorm) return print_norm_comparison(a, rows);
  if (a.compare == "deterministic") return print_deterministic_comparison(rows);
  std::cout << "#\n# Same sweep, same data, out of place: time (us, best batch), bus bandwidth "
               "(GB/s) and spread (median batch / best) per engine; speed-up: the engine's time "
               "over tpcomm's\n";
  std::cout << fmt::format(
      "# {:>10}   {:>9} {:>7} {:>6}   {:>10} {:>7} {:>6}   {:>9} {:>7} {:>6} {:>8}   {:>9} {:>7} "
      "{:>6} {:>8}\n",
      "size", "tpcomm", "busbw", "spread", "registered", "busbw", "spread", "mpi", "busbw",
      "spread", "speed-up", "gloo", "busbw", "spread", "speed-up");
  for (const auto& r : rows) {
    auto col = [&](const std::optional<Timing>& t) {
      return t ? fmt::format("{:>9.2f} {:>7.2f} {:>6.2f} {:>7.2f}x", t->best,
                             busbw(a, w, r.bytes, t->best), t->spread(), t->best / r.time_oop)
               : fmt::format("{:>9} {:>7} {:>6} {:>8}", "-", "-", "-", "-");
    };
    const std::string reg =
        r.registered ? fmt::format("{:>10.2f} {:>7.2f} {:>6.2f}", r.registered->best,
                                   busbw(a, w, r.bytes, r.registered->best), r.registered->spread())
                     : fmt::format("{:>10} {:>7} {:>6}", "-", "-", "-");
    std::cout << fmt::format("  {:>10}   {:>9.2f} {:>7.2f} {:>6.2f}   {}   {}   {}\n", r.bytes,
                             r.time_oop, busbw(a, w, r.bytes, r.time_oop), r.spread_oop, reg,
                             col(r.mpi), col(r.gloo));
  }
}

// Where staged calls' time went, size by size: the whole call, each stage (waits for peers
// included) and the rest (conversions and copies around the stages).
void print_stages(const std::vector<BenchRow>& rows) {
  const BenchRow* named = nullptr;
  for (const auto& r : rows) {
    if (!r.stages_us.empty()) named = &r;
  }
  if (named == nullptr) return;
  std::cout << "#\n# Where a staged call's time goes (us per call, mean over every rank; a stage "
               "includes its waits for peers, the rest is conversion and copying)\n";
  std::string header = fmt::format("# {:>10} {:>10}", "size", "call");
  for (const auto& [name, us] : named->stages_us) header += fmt::format(" {:>24}", name);
  std::cout << header << fmt::format(" {:>10}\n", "rest");
  for (const auto& r : rows) {
    if (r.stages_us.empty()) continue;
    std::string line = fmt::format("  {:>10} {:>10.2f}", r.bytes, r.staged_call_us);
    double rest = r.staged_call_us;
    for (const auto& [name, us] : r.stages_us) {
      line += fmt::format(" {:>24.2f}", us);
      rest -= us;
    }
    std::cout << line << fmt::format(" {:>10.2f}\n", std::max(rest, 0.0));
  }
}

void plot(const BenchArgs& a, int w, const std::vector<BenchRow>& rows) {
  const bool with_mpi = a.compare.find("mpi") != std::string::npos;
  const bool with_gloo = a.compare.find("gloo") != std::string::npos;
  std::vector<PlotSeries> series(1);
  series[0].engine = "tpcomm";
  if (with_mpi) series.push_back({"Open MPI", {}, {}, {}});
  if (with_gloo) series.push_back({"Gloo", {}, {}, {}});
  for (const auto& r : rows) {
    auto add = [&](PlotSeries& s, double us) {
      s.bytes.push_back(static_cast<double>(r.bytes));
      s.time_us.push_back(us);
      s.busbw.push_back(busbw(a, w, r.bytes, us));
    };
    add(series[0], r.time_oop);
    if (with_mpi && r.mpi) add(series[1], r.mpi->best);
    if (with_gloo && r.gloo) add(series[with_mpi ? 2 : 1], r.gloo->best);
  }
  write_plot(a.plot, fmt::format("{} {} on {} ranks", to_string(a.op), to_string(a.dtype), w),
             series);
  std::cout << fmt::format("# plot written to {}\n", a.plot);
}

void write_json(const BenchArgs& a, int w, const BenchSetting& setting,
                const std::vector<BenchRow>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json o = {{"op", to_string(a.op)},
                        {"type", to_string(a.dtype)},
                        {"redop", to_string(a.redop)},
                        {"ranks", w},
                        {"bytes", r.bytes},
                        {"count", r.count},
                        {"time_us", r.time_oop},
                        {"time_in_place_us", r.time_ip},
                        {"spread", r.spread_oop},
                        {"algbw_gbs", static_cast<double>(r.bytes) / r.time_oop / 1e3},
                        {"busbw_gbs", busbw(a, w, r.bytes, r.time_oop)},
                        {"wrong", r.wrong_oop + r.wrong_ip},
                        {"backend_algorithm", r.path},
                        {"plan", setting.digest},
                        {"nodes", setting.nodes},
                        {"shm_reductions", transport::cpu::kernel_isa()},
                        {"rank_cpus", setting.rank_cpus}};
    if (setting.link_rate_bits) o["link_rate_bits"] = *setting.link_rate_bits;
    if (setting.link_loss_percent) o["link_loss_percent"] = *setting.link_loss_percent;
    if (r.mpi) {
      o["mpi_time_us"] = r.mpi->best;
      o["mpi_spread"] = r.mpi->spread();
    }
    if (r.registered) {
      o["registered_time_us"] = r.registered->best;
      o["registered_spread"] = r.registered->spread();
    }
    if (r.gloo) {
      o["gloo_time_us"] = r.gloo->best;
      o["gloo_spread"] = r.gloo->spread();
    }
    if (!r.default_rounds.empty()) {
      o["default_rounds_us"] = r.default_rounds;
      o["deterministic_rounds_us"] = r.deterministic_rounds;
      o["deterministic_backend_algorithm"] = r.deterministic_path;
    }
    if (r.unfused) {
      o["unfused_time_us"] = r.unfused->best;
      o["unfused_spread"] = r.unfused->spread();
      o["hidden"] = a.hidden;
    }
    if (!r.stages_us.empty()) {
      o["staged_call_us"] = r.staged_call_us;
      for (const auto& [name, us] : r.stages_us) o["stages_us"][name] = us;
    }
    j.push_back(o);
  }
  std::ofstream(a.json) << j.dump(2) << "\n";
}

// "0 | 1": each rank's CPUs in rank order (the first 16); ranks all on one set of several CPUs
// say so, since then the scheduler, not the launcher, placed them.
std::string rank_cpus_text(const std::vector<std::string>& cpus) {
  const bool alike =
      std::all_of(cpus.begin(), cpus.end(), [&](const auto& c) { return c == cpus[0]; });
  if (cpus.size() > 1 && alike && cpus[0].find_first_of(",-") != std::string::npos) {
    return fmt::format("{}, every rank (not bound apart)", cpus[0]);
  }
  constexpr std::size_t kShown = 16;
  std::string out;
  for (std::size_t r = 0; r < cpus.size() && r < kShown; ++r) {
    out += fmt::format("{}{}", r == 0 ? "" : " | ", cpus[r]);
  }
  if (cpus.size() > kShown) out += " | ...";
  return out;
}

// ", links of 10 Gbit/s, 1% loss": what the simulated nodes' links were given, if anything.
std::string links_text(const BenchSetting& setting) {
  std::string out;
  if (setting.link_rate_bits) {
    out += fmt::format(", links of {} Mbit/s", static_cast<double>(*setting.link_rate_bits) / 1e6);
  }
  if (setting.link_loss_percent) out += fmt::format(", {}% loss", *setting.link_loss_percent);
  return out;
}

}  // namespace

void print_table_header(const BenchArgs& a, int w, const BenchSetting& setting) {
  std::cout << fmt::format(
      "# tpcomm bench: {} {} {} on {} ranks ({} node{}{}), plan {}, shm reductions {}\n",
      to_string(a.op), to_string(a.dtype), to_string(a.redop), w, setting.nodes,
      setting.nodes == 1 ? "" : "s", links_text(setting), setting.digest,
      transport::cpu::kernel_isa());
  std::cout << fmt::format("# CPUs of each rank: {}\n", rank_cpus_text(setting.rank_cpus));
  std::cout << fmt::format(
      "# {:>10} {:>12} {:>9} {:>6} {:>5}   {:>9} {:>7} {:>7} {:>6}   {:>9} {:>7} {:>7} {:>6}  "
      "{}\n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
      "busbw", "#wrong", "backend/algorithm");
  std::cout << fmt::format(
      "# {:>10} {:>12} {:>9} {:>6} {:>5}   {:>9} {:>7} {:>7} {:>6}   {:>9} {:>7} {:>7} {:>6}\n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
      "");
}

void print_table_row(const BenchArgs& a, int w, const BenchRow& row) {
  auto wrong = [&](std::uint64_t v) { return a.check ? std::to_string(v) : std::string("N/A"); };
  const double algbw = static_cast<double>(row.bytes) / row.time_oop / 1e3;
  const double algbw_ip = static_cast<double>(row.bytes) / row.time_ip / 1e3;
  // No in-place form (all_to_all, send_recv): dashes.
  const std::string in_place =
      std::isnan(row.time_ip)
          ? fmt::format("{:>9} {:>7} {:>7} {:>6}", "-", "-", "-", "-")
          : fmt::format("{:>9.2f} {:>7.2f} {:>7.2f} {:>6}", row.time_ip, algbw_ip,
                        algbw_ip * bus_factor(a.op, w), wrong(row.wrong_ip));
  std::cout << fmt::format(
                   "  {:>10} {:>12} {:>9} {:>6} {:>5}   {:>9.2f} {:>7.2f} {:>7.2f} {:>6}   "
                   "{}  {}\n",
                   row.bytes, row.count, to_string(a.dtype), to_string(a.redop), -1, row.time_oop,
                   algbw, algbw * bus_factor(a.op, w), wrong(row.wrong_oop), in_place, row.path)
            << std::flush;
}

void finish_report(const BenchArgs& a, int w, const BenchSetting& setting,
                   const std::vector<BenchRow>& rows, std::uint64_t total_wrong) {
  double busbw_sum = 0;
  for (const auto& r : rows) busbw_sum += busbw(a, w, r.bytes, r.time_oop);
  const std::size_t n = rows.empty() ? 1 : rows.size();
  std::cout << fmt::format("# Out of bounds values : {} {}\n", total_wrong,
                           total_wrong == 0 ? "OK" : "FAILED");
  std::cout << fmt::format("# Avg bus bandwidth    : {:.3f}\n", busbw_sum / static_cast<double>(n));
  print_stages(rows);
  if (!a.compare.empty() || a.registered) print_comparison(a, w, rows);
  if (!a.plot.empty()) plot(a, w, rows);
  if (!a.json.empty()) write_json(a, w, setting, rows);
}

}  // namespace tpcomm::cli
