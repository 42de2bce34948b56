// Timing of tpcomm bench: every engine's calls are timed the same way, the slowest rank counts.
#pragma once

#include <cstdint>
#include <functional>

#include "tpcomm/bootstrap.hpp"

namespace tpcomm::cli {

// The first row would also measure the group settling in (ranks just started, the scheduler
// still placing them): it gets at least this many warm-up calls, for every engine.
inline constexpr int kFirstRowWarmup = 1000;

// Microseconds per call: the best batch mean (what the tables report) and the median batch mean,
// each the slowest rank's. median / best is the row's spread: how much the machine's noise moved
// the batches.
struct Timing {
  double best = 0;
  double median = 0;
  double spread() const { return best > 0 ? median / best : 0; }
};

// Times `call` in batches, after `warmup` untimed calls; each timed run starts after one more
// call that lines the ranks up. The warm-up is timed too, and with iters == 0 its slowest rank's
// mean sets the number of timed calls, the same on every rank.
Timing time_calls(Bootstrap& bs, int warmup, int iters, const std::function<void()>& call);

// The sum of every rank's value.
std::uint64_t sum_over_ranks(Bootstrap& bs, std::uint64_t mine);

}  // namespace tpcomm::cli
