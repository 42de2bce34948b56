// tpcomm tune: times every eligible backend and algorithm of each operation on this machine, for
// a group of N ranks, and writes the tuning file (docs/tuning.md) that picks the fastest at each
// size. Each candidate is timed by `tpcomm bench` forced to it through a one-row tuning file, so
// the timing is the benchmark's own (batches, slowest rank, binding).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "bench/team_tune.hpp"
#include "bench/tune_candidates.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "common/text_file.hpp"
#include "launcher/team_launch.hpp"
#include "report/machine_text.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/plan.hpp"
#include "tpcomm/probe.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm::cli {
namespace {

struct Measured {
  std::vector<Candidate> candidates;
  std::vector<std::map<std::uint64_t, double>> times;  // per candidate
  std::vector<std::uint64_t> sizes;
};

// The fastest candidate measured at `size`, or -1. A candidate with a step of at least `size`
// moves the message in one step, as its sibling without a step does (also measured): the same
// run, so only noise could put it ahead, and it is not chosen there (on the 2-vCPU VM one tune
// had one_shot at 17.1 us and one_shot/256K at 12.0 for 256 KiB, where alternating the two in
// tpcomm bench gave 23.0-24.1 against 23.0-23.8).
int fastest(const Measured& m, std::uint64_t size) {
  int best = -1;
  for (std::size_t i = 0; i < m.candidates.size(); ++i) {
    const auto& step = m.candidates[i].step_bytes;
    if (step && *step >= size) continue;
    auto t = m.times[i].find(size);
    if (t == m.times[i].end()) continue;
    if (best < 0 || t->second < m.times[static_cast<std::size_t>(best)].at(size)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

// A measured candidate counts as faster than the built-in choice only below this fraction of its
// time.
constexpr double kKeepBuiltinWithin = 0.95;

// The candidate that is the built-in table's `row`, if measured at `size`.
int index_of(const Measured& m, const TableRow& row, std::uint64_t size) {
  for (std::size_t i = 0; i < m.candidates.size(); ++i) {
    const Candidate& c = m.candidates[i];
    if (c.backend == row.backend && c.algorithm == row.algorithm &&
        c.step_bytes == row.step_bytes && m.times[i].contains(size)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// The table of one op: every candidate's time per size, the choice, and its gain over what the
// built-in table runs at that size (when that was measured too).
std::vector<TuningRow> report_and_choose(const TuneArgs& a, Op op, const Measured& m,
                                         const Plan& builtin) {
  std::cout << fmt::format("\n{} {} on {} ranks: time per call (us, best of {} round{})\n",
                           to_string(op), to_string(a.dtype), a.ranks, a.rounds,
                           a.rounds == 1 ? "" : "s");
  // Every column as wide as its candidate's name (at least 14), so long names such as
  // shm/single_copy/256K keep the numbers under their heading.
  std::vector<std::size_t> width;
  std::size_t chosen_width = 14;
  for (const auto& c : m.candidates) {
    width.push_back(std::max<std::size_t>(14, name_of(c).size()));
    chosen_width = std::max(chosen_width, name_of(c).size());
  }
  std::cout << fmt::format("{:>10}", "size");
  for (std::size_t i = 0; i < m.candidates.size(); ++i) {
    std::cout << fmt::format(" {:>{}}", name_of(m.candidates[i]), width[i]);
  }
  std::cout << fmt::format("  {:<{}} {:>16}\n", "chosen", chosen_width, "gain vs built-in");
  std::vector<TuningRow> rows;
  for (std::uint64_t size : m.sizes) {
    int best = fastest(m, size);
    if (best < 0) continue;
    const TableRow& was = builtin.ops.at(op).row_for(size);
    const int builtin_index = index_of(m, was, size);
    // One run's noise must not move a switch point: the built-in choice stays unless another is
    // clearly faster.
    if (builtin_index >= 0 &&
        m.times[static_cast<std::size_t>(builtin_index)].at(size) * kKeepBuiltinWithin <=
            m.times[static_cast<std::size_t>(best)].at(size)) {
      best = builtin_index;
    }
    const Candidate& chosen = m.candidates[static_cast<std::size_t>(best)];
    std::cout << fmt::format("{:>10}", size);
    for (std::size_t i = 0; i < m.times.size(); ++i) {
      auto it = m.times[i].find(size);
      std::cout << (it == m.times[i].end() ? fmt::format(" {:>{}}", "-", width[i])
                                           : fmt::format(" {:>{}.2f}", it->second, width[i]));
    }
    const std::string gain =
        builtin_index < 0
            ? std::string("-")
            : fmt::format("{:.2f}x", m.times[static_cast<std::size_t>(builtin_index)].at(size) /
                                         m.times[static_cast<std::size_t>(best)].at(size));
    std::cout << fmt::format("  {:<{}} {:>16}\n", name_of(chosen), chosen_width, gain);
    // One row while the choice (and what follows it, across nodes) stays the same.
    auto use = with_builtin_after(chosen, a, op, size);
    if (!rows.empty() && rows.back().use == use) {
      rows.back().max_bytes = size;
    } else {
      rows.push_back(TuningRow{size, std::move(use)});
    }
  }
  if (!rows.empty()) rows.back().max_bytes = std::nullopt;
  // "one_shot up to 4 MiB, two_shot above": the last row has no limit.
  // Rows that differ only in what follows the choice (across nodes) are one switch point.
  std::cout << "switch points:";
  std::size_t printed = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string name = name_of(rows[i].use.front());
    if (i + 1 < rows.size() && name_of(rows[i + 1].use.front()) == name) continue;
    const std::string range = rows[i].max_bytes ? "up to " + format_bytes(*rows[i].max_bytes)
                              : printed == 0    ? std::string("at every size")
                                                : std::string("above");
    std::cout << fmt::format("{} {} {}", printed++ == 0 ? "" : ",", name, range);
  }
  std::cout << "\n";
  return rows;
}

// A tune measures for minutes: an output it could not write must fail before that, not after.
void check_writable(const std::string& path) {
  const std::filesystem::path p(path);
  const std::filesystem::path folder = p.has_parent_path() ? p.parent_path() : ".";
  std::error_code ec;
  if (path.empty()) throw invalid_input("tune: -o: the output path is empty");
  if (std::filesystem::is_directory(p, ec)) {
    throw invalid_input(fmt::format("tune: cannot write {}: it is a folder", path));
  }
  if (access(folder.c_str(), W_OK | X_OK) != 0 ||
      (access(p.c_str(), F_OK) == 0 && access(p.c_str(), W_OK) != 0)) {
    throw invalid_input(fmt::format("tune: cannot write {}: {}", path, std::strerror(errno)));
  }
}

// Written beside the target and renamed over it: an interrupted or failed write leaves the
// previous file (or none), never half a tuning file that every rank would then fail to decode.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string partial = fmt::format("{}.partial-{}", path, getpid());
  std::ofstream file(partial);
  file << text;
  file.close();
  if (!file || std::rename(partial.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(partial.c_str());
    throw invalid_input(fmt::format("tune: cannot write {}: {}", path, std::strerror(err)));
  }
}

// The entry of one group size: every op's candidates timed in alternating rounds, and the rows
// of the fastest.
TuningEntry tune_group(const TuneArgs& a, const std::string& self, const char* dir) {
  const Plan builtin = builtin_plan(a);
  TuningEntry entry;
  entry.key.device = DeviceType::kCpu;
  entry.key.world_size = a.ranks;
  for (Op op : a.ops) {
    Measured m;
    m.candidates = candidates(op, builtin, a.steps);
    for (std::uint64_t s = a.min_bytes; s <= a.max_bytes; s *= a.factor) m.sizes.push_back(s);
    // Rounds alternate the candidates and each keeps its best time per size: a machine whose
    // speed drifts over minutes (a VM moved between caches) then hits every candidate alike,
    // instead of one candidate's whole sweep landing in a slow spell.
    m.times.resize(m.candidates.size());
    for (int round = 1; round <= a.rounds; ++round) {
      for (std::size_t i = 0; i < m.candidates.size(); ++i) {
        std::cerr << fmt::format("tune: {} ranks, {} via {} (round {} of {}) ...\n", a.ranks,
                                 to_string(op), name_of(m.candidates[i]), round, a.rounds);
        for (const auto& [size, us] : measure(a, op, m.candidates[i], self, dir)) {
          auto [it, first] = m.times[i].emplace(size, us);
          if (!first) it->second = std::min(it->second, us);
        }
      }
    }
    entry.ops[op] = report_and_choose(a, op, m, builtin);
  }
  entry.team_min_bytes = tune_team_min_bytes(a, entry, self, dir);
  return entry;
}

void run_tune(const TuneArgs& a) {
  if (a.min_bytes == 0 || a.max_bytes < a.min_bytes || a.factor < 2) {
    throw invalid_input("-b, -e, -f: expected 0 < MIN <= MAX and FACTOR >= 2");
  }
  std::set<int> seen;  // a file has one entry per group size
  for (int w : a.groups) {
    if (!seen.insert(w).second) throw invalid_input(fmt::format("-n: {} ranks given twice", w));
  }
  check_writable(a.output);
  char dir_template[] = "/tmp/tpcomm-tune-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) throw Error(ErrorCode::kUnavailable, "tune: cannot make a temporary folder");
  const std::unique_ptr<const char, void (*)(const char*)> cleanup(dir, [](const char* d) {
    std::remove((std::string(d) + "/forced.json").c_str());
    std::remove((std::string(d) + "/rows.json").c_str());
    rmdir(d);
  });
  const std::string self = self_executable();
  const std::string machine = machine_summary();
  std::cout << fmt::format("tpcomm tune on {}\n", machine);
  Tuning out;
  for (int w : a.groups) {
    TuneArgs group = a;
    group.ranks = w;
    out.entries.push_back(tune_group(group, self, dir));
  }
  const std::string where =
      a.nodes == 1 ? std::string()
                   : fmt::format(" over {} simulated nodes{}", a.nodes,
                                 a.launch == "mpirun" ? " (ranks started by mpirun)" : "");
  out.source = fmt::format(
      "measured by tpcomm tune on {}: {} ranks{}, {}, {} to {} bytes, best of {} rounds", machine,
      fmt::join(a.groups, ", "), where, to_string(a.dtype), a.min_bytes, a.max_bytes, a.rounds);
  write_atomically(a.output, encode_tuning(out));
  std::cout << fmt::format("\nwrote {}: use it with TPCOMM_TUNING={} or tpcomm plan --tuning {}\n",
                           a.output, a.output, a.output);
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Time every eligible backend and algorithm of each operation on this machine and write the "
      "tuning file that picks the fastest at each size (docs/tuning.md)");
  cmd->add_option("-o,--output", a->output, "the tuning file to write")->required();
  cmd->add_option("-n,--ranks", a->groups,
                  "ranks of the group to tune for; several (-n 2,4) write one file with an entry "
                  "for each")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::Range(2, 64));
  cmd->add_option_function<std::vector<std::string>>(
         "--ops",
         [a](const std::vector<std::string>& names) {
           a->ops.clear();
           for (const auto& n : names) a->ops.push_back(*from_string<Op>(n));
         },
         "operations to tune (default: all_reduce all_gather reduce_scatter)")
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "all_reduce_rmsnorm"}))
      ->delimiter(',');
  cmd->add_option("--hidden", a->hidden, "all_reduce_rmsnorm: the row length timed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  add_enum_option(cmd, "--dtype", a->dtype, "the element type timed");
  add_size_option(cmd, "-b,--minbytes", a->min_bytes, "smallest size");
  add_size_option(cmd, "-e,--maxbytes", a->max_bytes, "largest size");
  cmd->add_option("-f,--stepfactor", a->factor, "size multiplier")->capture_default_str();
  cmd->add_option("--rounds", a->rounds,
                  "times each candidate is run, alternating with the others; the best counts")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--steps", a->steps,
                  "shm step sizes to time besides the lane (bytes, or K, M: a multiple of 64, "
                  "at least 4K)")
      ->default_str("128K")
      ->delimiter(',')
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(kMinStepBytes, kMaxStepBytes));
  cmd->add_option("--bind-to", a->bind_to, "as tpcomm bench --bind-to")
      ->capture_default_str()
      ->check(CLI::IsMember({"core", "none"}));
  cmd->add_option("--nodes", a->nodes,
                  "time the group over K simulated nodes with their own network (as tpcomm bench "
                  "--nodes; needs root): hier and, with --launch mpirun, hier_mpi")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--launch", a->launch,
                  "who starts the ranks: tpcomm, or mpirun (they bootstrap through MPI, so "
                  "hier_mpi is timed too)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tpcomm", "mpirun"}));
  add_threads_option(cmd, a->threads);
  cmd->callback([a] { run_tune(*a); });
}

}  // namespace tpcomm::cli
