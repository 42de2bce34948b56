// Timing across ranks for tpcomm bench (bench_timing.hpp).
#include "bench_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace tpcomm::cli {
namespace {

using Clock = std::chrono::steady_clock;

// With --iters 0 (the default) every size runs as many calls as fit in this much time: a few
// calls of a microsecond each measure the machine's noise (one preemption is tens of
// microseconds), not the collective.
constexpr double kAutoTimeUs = 25'000;
constexpr int kAutoMinIters = 21;  // at least 7 per batch
constexpr int kAutoMaxIters = 100'000;
constexpr int kBatches = 3;

double max_over_ranks(Bootstrap& bs, double mine_value, const char* what) {
  Bytes mine(sizeof(double));
  std::memcpy(mine.data(), &mine_value, sizeof(double));
  double largest = 0;
  for (const auto& b : bs.all_gather(mine, what, Deadline::from_env())) {
    double v;
    std::memcpy(&v, b.data(), sizeof(double));
    largest = std::max(largest, v);
  }
  return largest;
}

}  // namespace

double time_calls(Bootstrap& bs, int warmup, int iters, const std::function<void()>& call) {
  const auto w0 = Clock::now();
  for (int i = 0; i < warmup; ++i) call();
  if (iters == 0) {
    const double warm_us =
        warmup > 0 ? std::chrono::duration<double, std::micro>(Clock::now() - w0).count() / warmup
                   : kAutoTimeUs / kAutoMinIters;
    const double slowest = max_over_ranks(bs, warm_us, "bench calibration");
    iters = static_cast<int>(std::clamp(kAutoTimeUs / std::max(slowest, 1e-3),
                                        double{kAutoMinIters}, double{kAutoMaxIters}));
  }
  // Three batches, each started together; the best batch mean counts, so one preemption by a
  // neighbour on a shared machine does not decide a row (the same for every engine).
  double us = 0;
  for (int batch = 0; batch < kBatches; ++batch) {
    bs.barrier("bench", Deadline::from_env());
    const int n = std::max(1, iters / kBatches);
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) call();
    const double mean = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
    us = batch == 0 ? mean : std::min(us, mean);
  }
  return max_over_ranks(bs, us, "bench times");
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
