// Timing across ranks for tpcomm bench (bench_timing.hpp).
#include "bench_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace tpcomm::cli {
namespace {

using Clock = std::chrono::steady_clock;

// With --iters 0 (the default) every size runs as many calls as fit in this much time: a few
// calls of a microsecond each measure the machine's noise (one preemption is tens of
// microseconds), not the collective.
constexpr double kAutoTimeUs = 25'000;
constexpr int kAutoMinIters = 35;  // at least 7 per batch
constexpr int kAutoMaxIters = 100'000;
constexpr int kBatches = 5;
// The least time the warm-up of every timing takes. Ten calls of a microsecond were too few
// after another engine's timing: on the 2-vCPU VM the tpcomm row after a Gloo row took 35-50 us
// per call in every batch (1.3-3.3 us otherwise, and with 300 warm-up calls), as if the ranks
// needed a few milliseconds to settle back on their cores.
constexpr double kSettleUs = 2'000;

// Each value's largest over the ranks.
std::vector<double> max_over_ranks(Bootstrap& bs, std::vector<double> mine, const char* what) {
  Bytes bytes(mine.size() * sizeof(double));
  std::memcpy(bytes.data(), mine.data(), bytes.size());
  for (const auto& b : bs.all_gather(bytes, what, Deadline::from_env())) {
    for (std::size_t i = 0; i < mine.size(); ++i) {
      double v;
      std::memcpy(&v, b.data() + i * sizeof(double), sizeof(double));
      mine[i] = std::max(mine[i], v);
    }
  }
  return mine;
}

}  // namespace

Timing time_calls(Bootstrap& bs, int warmup, int iters, const std::function<void()>& call) {
  // Warm-up rounds of `warmup`, 2x, 4x ... calls until the slowest rank has spent kSettleUs in
  // them (ranks agree after each round, so all make the same calls).
  int warmed = 0;
  double warm_us = 0;  // the slowest rank's time in warm-up calls
  double mine_us = 0;
  for (int round_calls = warmup; round_calls > 0; round_calls *= 2) {
    const auto w0 = Clock::now();
    for (int i = 0; i < round_calls; ++i) call();
    mine_us += std::chrono::duration<double, std::micro>(Clock::now() - w0).count();
    warmed += round_calls;
    warm_us = max_over_ranks(bs, {mine_us}, "bench warm-up")[0];
    if (warm_us >= kSettleUs || round_calls > kAutoMaxIters) break;
  }
  if (iters == 0) {
    const double per_call = warmed > 0 ? warm_us / warmed : kAutoTimeUs / kAutoMinIters;
    iters = static_cast<int>(std::clamp(kAutoTimeUs / std::max(per_call, 1e-3),
                                        double{kAutoMinIters}, double{kAutoMaxIters}));
  }
  // Five batches, each started together; the best batch mean counts, so one preemption by a
  // neighbour on a shared machine does not decide a row (the same for every engine), and the
  // median batch shows how much noise there was.
  std::vector<double> means;
  for (int batch = 0; batch < kBatches; ++batch) {
    bs.barrier("bench", Deadline::from_env());
    const int n = std::max(1, iters / kBatches);
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) call();
    means.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n);
  }
  std::sort(means.begin(), means.end());
  const auto slowest = max_over_ranks(bs, {means.front(), means[means.size() / 2]}, "bench times");
  return {slowest[0], slowest[1]};
}

std::uint64_t sum_over_ranks(Bootstrap& bs, std::uint64_t mine_value) {
  Bytes mine(8);
  std::memcpy(mine.data(), &mine_value, 8);
  std::uint64_t total = 0;
  for (const auto& b : bs.all_gather(mine, "bench check", Deadline::from_env())) {
    std::uint64_t v;
    std::memcpy(&v, b.data(), 8);
    total += v;
  }
  return total;
}

}  // namespace tpcomm::cli
