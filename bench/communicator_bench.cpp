// How long creating a communicator takes: 4 ranks on one node (threads of this process, each
// with its own TCP store connection, as processes under tpcomm run would have), through the
// whole protocol — probe, facts exchange, node probe, plan, digest vote, voted gloo set-up.
// And a barrier: the bootstrap's over the store against Communicator::barrier, one small
// collective over shm or Gloo (docs/communicator.md, "Calls"), side by side in one run. And what
// counting a call for Communicator::stats() costs (docs/communicator.md, "Statistics"):
// BM_CountCall, against the 4 KiB all-reduce it is part of (tpcomm bench -b 4096,
// bench/python_overhead.sh).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <thread>

#include "runtime/call_counters.hpp"
#include "tpcomm/tcp_store.hpp"
#include "tpcomm/tpcomm.hpp"

namespace {

// `ranks` bootstraps over one TCP store on loopback, each with its own connection.
std::vector<std::shared_ptr<tpcomm::Bootstrap>> store_group(const tpcomm::TcpStoreServer& server,
                                                            int ranks) {
  std::vector<std::shared_ptr<tpcomm::Bootstrap>> group;
  for (int r = 0; r < ranks; ++r) {
    group.push_back(tpcomm::make_store_bootstrap(
        tpcomm::connect_tcp_store("127.0.0.1", server.port(),
                                  tpcomm::Deadline::after(std::chrono::seconds(10))),
        r, ranks));
  }
  return group;
}

void BM_CreateCommunicator(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  tpcomm::TcpStoreServer server("127.0.0.1", 0);
  const auto group = store_group(server, ranks);
  for (auto _ : state) {
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back(
          [&, r] { auto comm = tpcomm::Communicator::create(group[static_cast<std::size_t>(r)]); });
    }
    for (auto& t : threads) t.join();
  }
}

BENCHMARK(BM_CreateCommunicator)
    ->Arg(2)
    ->Arg(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

constexpr int kBarriersPerIteration = 100;

// Each iteration: every rank (a thread) passes kBarriersPerIteration barriers; the counter
// `per_barrier` is the time of one. Arg 0: the bootstrap's barrier (store round trips); 1:
// Communicator::barrier over shm; 2: over Gloo (TPCOMM_DISABLE=shm).
void BM_Barrier(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  constexpr int kRanks = 2;
  setenv("TPCOMM_DISABLE", kind == 2 ? "shm" : "", 1);
  tpcomm::TcpStoreServer server("127.0.0.1", 0);
  auto group = store_group(server, kRanks);
  std::vector<std::unique_ptr<tpcomm::Communicator>> comms(kRanks);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] { comms[r] = tpcomm::Communicator::create(group[r]); });
    }
    for (auto& t : threads) t.join();
  }
  unsetenv("TPCOMM_DISABLE");
  std::uint64_t round = 0;
  auto pass = [&](int r, std::uint64_t first) {
    for (int i = 0; i < kBarriersPerIteration; ++i) {
      if (kind == 0) {
        group[r]->barrier("bench #" + std::to_string(first + i),
                          tpcomm::Deadline::after(std::chrono::seconds(10)));
      } else {
        comms[r]->barrier();
      }
    }
  };
  for (auto _ : state) {
    std::thread peer(pass, 1, round);
    pass(0, round);
    peer.join();
    round += kBarriersPerIteration;
  }
  state.counters["per_barrier"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kBarriersPerIteration,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(kind == 0   ? "store (bootstrap)"
                 : kind == 1 ? "collective, shm"
                             : "collective, gloo");
}

BENCHMARK(BM_Barrier)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// One completed call's counting, as dispatch.cpp does it: two relaxed atomic
// increments on the communicator's own counters.
void BM_CountCall(benchmark::State& state) {
  tpcomm::runtime::CallCounters counters;
  for (auto _ : state) {
    counters.add(tpcomm::Collective::kAllReduce, tpcomm::Backend::kShm, tpcomm::Algorithm::kOneShot,
                 1, 4096);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(counters.read());
}
BENCHMARK(BM_CountCall)->Repetitions(5)->ReportAggregatesOnly(true);

BENCHMARK_MAIN();
