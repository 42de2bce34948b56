// A rank's thread team alone (transport/team): what waking the sleeping workers for one call and
// waiting for them costs (BM_TeamWake: an empty call, the team's fixed price per call, which the
// tuning table's team_min_bytes must repay), and a copy split over the team against the caller
// alone (BM_TeamCopy: memcpy, then streaming stores), 1 and 2 threads.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "transport/shm/shm_team_ops.hpp"
#include "transport/team/thread_team.hpp"

namespace {

using tpcomm::transport::ThreadTeam;

void BM_TeamWake(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadTeam team(threads);
  for (auto _ : state) {
    team.run(threads, [](int part) { benchmark::DoNotOptimize(part); });
  }
}
BENCHMARK(BM_TeamWake)->ArgNames({"threads"})->Arg(1)->Arg(2)->Arg(3)->UseRealTime();

void BM_TeamCopy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const bool streaming = state.range(2) != 0;
  std::vector<std::uint8_t> from(bytes, 1), to(bytes);
  ThreadTeam team(threads);
  for (auto _ : state) {
    tpcomm::transport::shm::team_copy(&team, to.data(), from.data(), bytes, streaming);
    benchmark::DoNotOptimize(to.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_TeamCopy)
    ->ArgNames({"bytes", "threads", "streaming"})
    ->ArgsProduct({{256 << 10, 1 << 20, 4 << 20, 16 << 20}, {1, 2}, {0, 1}})
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
