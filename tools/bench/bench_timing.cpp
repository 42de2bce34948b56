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
  // Every timed run of calls starts after one untimed call, `line_up`: the store's barriers and
  // gathers release the ranks up to milliseconds apart on a loaded machine (on the 2-vCPU VM the
  // first call after a barrier took 1.4-6.8 ms), and that skew, charged to a batch of a few
  // hundred one-microsecond calls, made whole rows of `tpcomm bench` read 10-33 us where the
  // calls take 1.5-4 (8 of 12 runs of a 4-64 KiB sweep had such a row; none of 12 after). The
  // untimed call ends on every rank within microseconds of the others, whatever engine it goes
  // through.
  const auto& line_up = call;
  line_up();
  const auto w0 = Clock::now();
  for (int i = 0; i < warmup; ++i) call();
  if (iters == 0) {
    const double warm_us =
        warmup > 0 ? std::chrono::duration<double, std::micro>(Clock::now() - w0).count() / warmup
                   : kAutoTimeUs / kAutoMinIters;
    const double slowest = max_over_ranks(bs, {warm_us}, "bench calibration")[0];
    iters = static_cast<int>(std::clamp(kAutoTimeUs / std::max(slowest, 1e-3),
                                        double{kAutoMinIters}, double{kAutoMaxIters}));
  }
  // Five batches, each started together; the best batch mean counts, so one preemption by a
  // neighbour on a shared machine does not decide a row (the same for every engine), and the
  // median batch shows how much noise there was.
  std::vector<double> means;
  for (int batch = 0; batch < kBatches; ++batch) {
    bs.barrier("bench", Deadline::from_env());
    line_up();
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
