// One candidate timed twice per round, with and without the team.
#include "team_tune.hpp"

#include <algorithm>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "launcher/cpu_binding.hpp"
#include "tpcomm/env.hpp"

namespace tpcomm::cli {
namespace {

// The team must be this much faster to count: one run's noise must not move the threshold.
constexpr double kTeamWinsBelow = 0.95;

void keep_best(std::map<std::uint64_t, double>& best, const std::map<std::uint64_t, double>& run) {
  for (const auto& [size, us] : run) {
    auto [it, first] = best.emplace(size, us);
    if (!first) it->second = std::min(it->second, us);
  }
}

}  // namespace

int team_threads_to_tune(const TuneArgs& a) {
  if (a.threads && *a.threads > 0) return *a.threads;
  if (const auto env = env_integer("TPCOMM_THREADS"); env > 0) return static_cast<int>(env);
  const auto cores = static_cast<int>(usable_cores_here().size());
  return std::max(1, cores / std::max(1, a.ranks));
}

std::optional<std::uint64_t> tune_team_min_bytes(const TuneArgs& a, const TuningEntry& entry,
                                                 const std::string& self, const std::string& dir) {
  const int threads = team_threads_to_tune(a);
  auto rows = entry.ops.find(Op::kAllReduce);
  if (threads <= 1 || rows == entry.ops.end() || rows->second.empty()) {
    std::cout << fmt::format(
        "\nteam: not measured ({}): team_min_bytes stays the default, {} bytes\n",
        threads <= 1 ? fmt::format("{} ranks on {} cores have one thread each", a.ranks,
                                   usable_cores_here().size())
                     : std::string("all_reduce was not tuned"),
        kDefaultTeamMinBytes);
    return std::nullopt;
  }
  const Candidate c = rows->second.back().use.front();
  if (c.backend != Backend::kShm) {
    std::cout << fmt::format("\nteam: not measured: the largest all-reduces run {}, not shm\n",
                             name_of(c));
    return std::nullopt;
  }
  std::map<std::uint64_t, double> alone, team;
  const TeamTrial one{1, 0}, many{threads, 0};
  for (int round = 1; round <= a.rounds; ++round) {
    std::cerr << fmt::format(
        "tune: {} ranks, all_reduce via {} with 1 and {} threads (round {} "
        "of {}) ...\n",
        a.ranks, name_of(c), threads, round, a.rounds);
    keep_best(alone, measure(a, Op::kAllReduce, c, self, dir, &one));
    keep_best(team, measure(a, Op::kAllReduce, c, self, dir, &many));
  }
  std::cout << fmt::format(
      "\nteam: all_reduce via {}, us per call with 1 and {} threads per rank\n", name_of(c),
      threads);
  std::optional<std::uint64_t> from;
  for (const auto& [size, us] : alone) {
    const auto t = team.find(size);
    if (t == team.end()) continue;
    const bool wins = t->second < us * kTeamWinsBelow;
    std::cout << fmt::format("{:>10} {:>12.2f} {:>12.2f}{}\n", size, us, t->second,
                             wins ? "  team" : "");
    if (!wins) {
      from.reset();
    } else if (!from) {
      from = size;
    }
  }
  const std::uint64_t chosen = from.value_or(std::uint64_t{1} << 40);
  std::cout << fmt::format(
      "team_min_bytes: {}\n",
      from ? fmt::format("{} (the team wins from there on)", chosen)
           : fmt::format("{} (the team won at no size up to the largest)", chosen));
  return chosen;
}

}  // namespace tpcomm::cli
