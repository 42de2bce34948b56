// How long creating a communicator takes: 4 ranks on one node (threads of this process, each
// with its own TCP store connection, as processes under tpcomm run would have), through the
// whole protocol — probe, facts exchange, node probe, plan, digest vote, voted gloo set-up.
#include <benchmark/benchmark.h>

#include <thread>

#include "tpcomm/tcp_store.hpp"
#include "tpcomm/tpcomm.hpp"

namespace {

void BM_CreateCommunicator(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  tpcomm::TcpStoreServer server("127.0.0.1", 0);
  std::vector<std::shared_ptr<tpcomm::Bootstrap>> group;
  for (int r = 0; r < ranks; ++r) {
    group.push_back(tpcomm::make_store_bootstrap(
        tpcomm::connect_tcp_store("127.0.0.1", server.port(),
                                  tpcomm::Deadline::after(std::chrono::seconds(10))),
        r, ranks));
  }
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

}  // namespace

BENCHMARK_MAIN();
