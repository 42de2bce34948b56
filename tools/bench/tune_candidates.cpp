// Timing one candidate of tpcomm tune (tune_candidates.hpp).
#include "tune_candidates.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text_file.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/probe.hpp"

namespace tpcomm::cli {

// What the benchmark's backend/algorithm column says of a call the candidate serves.
std::string path_of(const Candidate& c) {
  return fmt::format("{}/{}", to_string(c.backend), to_string(c.algorithm));
}

// One word, for the table's columns: the path, and "/256K" for a candidate with a step.
std::string name_of(const Candidate& c) {
  if (!c.step_bytes) return path_of(c);
  const std::uint64_t s = *c.step_bytes;
  return s % (1u << 20) == 0 ? fmt::format("{}/{}M", path_of(c), s >> 20)
         : s % 1024 == 0     ? fmt::format("{}/{}K", path_of(c), s >> 10)
                             : fmt::format("{}/{}", path_of(c), s);
}

// The built-in plan of the group being tuned: `a.ranks` on this machine, over `a.nodes`
// simulated nodes (sim-node-<i>, as tpcomm run names them), bootstrapped through MPI under
// --launch mpirun: what it admits, and what it runs.
Plan builtin_plan(const TuneArgs& a) {
  FactsTable facts = local_facts_table(probe_local(), a.ranks, DeviceType::kCpu);
  for (int r = 0; r < a.ranks; ++r) {
    auto& f = facts.ranks[static_cast<std::size_t>(r)];
    if (a.nodes > 1) f.host = fmt::format("sim-node-{}", static_cast<long>(r) * a.nodes / a.ranks);
    if (a.launch == "mpirun") f.mpi = "MPI (tpcomm tune --launch mpirun)";
  }
  return make_plan(facts, PlanOptions{}, Tuning{});
}

// Across nodes, what follows the chosen candidate in a row: the built-in row's own list, so that
// a group of the same size where the choice is refused (one node, no MPI world) runs what it
// would run without the file, not the fallback engine.
std::vector<Candidate> with_builtin_after(const Candidate& chosen, const TuneArgs& a, Op op,
                                          std::uint64_t size) {
  std::vector<Candidate> use = {chosen};
  if (a.nodes == 1) return use;
  const auto lookup = find_tuning({}, DeviceType::kCpu, 0, a.ranks, Mode::kEager, op);
  for (const auto& row : lookup.rows ? *lookup.rows : std::vector<TuningRow>{}) {
    if (row.max_bytes && size > *row.max_bytes) continue;
    for (const auto& c : row.use) {
      if (std::find(use.begin(), use.end(), c) == use.end()) use.push_back(c);
    }
    break;
  }
  return use;
}

// Every backend and algorithm the plan admits for `op`, and shm's with each step of `steps`
// (an all-gather's single_copy moves a message in one step: no steps).
std::vector<Candidate> candidates(Op op, const Plan& plan,
                                  const std::vector<std::uint64_t>& steps) {
  std::vector<Candidate> out;
  for (Backend b : plan.ops.at(op).eligible) {
    for (Algorithm a : algorithms_of(b, op)) {
      out.push_back(Candidate{b, a, std::nullopt, std::nullopt});
      if (!takes_step(b) || (op == Op::kAllGather && a == Algorithm::kSingleCopy)) continue;
      for (std::uint64_t s : steps) out.push_back(Candidate{b, a, std::nullopt, s});
    }
  }
  return out;
}

// Runs `tpcomm bench` for one op with every call forced to `c`; its time per size (us).
std::map<std::uint64_t, double> measure(const TuneArgs& a, Op op, const Candidate& c,
                                        const std::string& self, const std::string& dir,
                                        const TeamTrial* team) {
  Tuning forced;
  TuningEntry entry;
  entry.key.device = DeviceType::kCpu;
  entry.key.world_size = a.ranks;
  entry.ops[op] = {TuningRow{std::nullopt, {c}}};
  if (team) entry.team_min_bytes = team->min_bytes;
  forced.entries.push_back(entry);
  const std::string tuning = dir + "/forced.json";
  const std::string rows = dir + "/rows.json";
  std::ofstream(tuning) << encode_tuning(forced);
  std::vector<std::string> argv = {self,        "bench",
                                   "-n",        std::to_string(a.ranks),
                                   "--op",      std::string(to_string(op)),
                                   "--dtype",   std::string(to_string(a.dtype)),
                                   "-b",        std::to_string(a.min_bytes),
                                   "-e",        std::to_string(a.max_bytes),
                                   "-f",        std::to_string(a.factor),
                                   "--bind-to", a.bind_to,
                                   "--json",    rows};
  if (a.nodes > 1) argv.insert(argv.end(), {"--nodes", std::to_string(a.nodes)});
  if (a.launch != "tpcomm") argv.insert(argv.end(), {"--launch", a.launch});
  if (team) argv.insert(argv.end(), {"--threads", std::to_string(team->threads)});
  if (op == Op::kAllReduceRmsNorm) argv.insert(argv.end(), {"--hidden", std::to_string(a.hidden)});
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("TPCOMM_TUNING", tuning.c_str(), 1);
    if (std::FILE* quiet = std::freopen("/dev/null", "w", stdout)) (void)quiet;
    std::vector<char*> args;
    for (auto& s : argv) args.push_back(s.data());
    args.push_back(nullptr);
    execv(self.c_str(), args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(ErrorCode::kInternal,
                fmt::format("tune: tpcomm bench for {} via {} failed", to_string(op), name_of(c)));
  }
  std::map<std::uint64_t, double> times;
  for (const auto& row : nlohmann::json::parse(common::read_text_file(rows, "bench rows"))) {
    // A candidate the plan refused would run another path: it is not this candidate's time.
    if (row.at("backend_algorithm").get<std::string>() != path_of(c)) continue;
    times[row.at("bytes").get<std::uint64_t>()] = row.at("time_us").get<double>();
  }
  return times;
}

}  // namespace tpcomm::cli
