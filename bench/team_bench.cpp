// A rank's thread team alone (transport/cpu/thread_team): what waking the sleeping workers for one
// call and waiting for them costs (BM_TeamWake: an empty call, the team's fixed price per call,
// which the tuning table's team_min_bytes must repay), and a copy split over the team against the
// caller alone (BM_TeamCopy: memcpy, then streaming stores), 1 and 2 threads. And the floor under
// any small shm call: one cache line passed back and forth between two threads pinned to the first
// two usable CPUs (BM_CoreRoundTrip: one round trip per iteration), which shows where the
// hardware, or the hypervisor's placement of the vCPUs, puts W = 2 small-call latency; and a
// one-shot exchange of lanes between those two threads (BM_LaneExchange), the floor under a W = 2
// call of that size, whose repetitions in one process show whether that latency moves with time;
// and each of those CPUs' speed alone on L1-resident additions (BM_CoreSpeed).
#include <benchmark/benchmark.h>

#include <sched.h>

#include <cstring>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "transport/cpu/team_ops.hpp"
#include "transport/cpu/thread_team.hpp"

namespace {

using tpcomm::transport::cpu::ThreadTeam;

// `gap_us`: the caller works alone that long between calls (untimed), as a rank computes between
// collectives; the workers' CPUs then go idle, and waking them costs what waking an idle CPU
// costs (a VM's halted vCPU: a hypervisor round trip). With no gap they are barely asleep.
void BM_TeamWake(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const auto gap = std::chrono::microseconds(state.range(1));
  ThreadTeam team(threads);
  for (auto _ : state) {
    if (gap.count() > 0) {
      state.PauseTiming();
      const auto until = std::chrono::steady_clock::now() + gap;
      while (std::chrono::steady_clock::now() < until) {
      }
      state.ResumeTiming();
    }
    team.run(threads, [](int part) { benchmark::DoNotOptimize(part); });
  }
}

BENCHMARK(BM_TeamWake)
    ->ArgNames({"threads", "gap_us"})
    ->ArgsProduct({{1, 2}, {0, 50, 1000}})
    ->Iterations(2000)  // the gaps are untimed: a time-based count would run for minutes
    ->UseRealTime();

void BM_TeamCopy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const bool streaming = state.range(2) != 0;
  std::vector<std::uint8_t> from(bytes, 1), to(bytes);
  ThreadTeam team(threads);
  for (auto _ : state) {
    tpcomm::transport::cpu::team_copy(&team, to.data(), from.data(), bytes, streaming);
    benchmark::DoNotOptimize(to.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_TeamCopy)
    ->ArgNames({"bytes", "threads", "streaming"})
    ->ArgsProduct({{256 << 10, 1 << 20, 4 << 20, 16 << 20}, {1, 2}, {0, 1}})
    ->UseRealTime();

void pin_to(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_setaffinity(0, sizeof(one), &one);
}

// The first two usable CPUs, or fewer where there are not two.
std::vector<int> first_two_cpus() {
  const cpu_set_t usable = tpcomm::transport::cpu::current_cpus();
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &usable)) cpus.push_back(c);
  }
  return cpus;
}

void BM_CoreRoundTrip(benchmark::State& state) {
  const cpu_set_t usable = tpcomm::transport::cpu::current_cpus();
  const auto cpus = first_two_cpus();
  if (cpus.size() < 2) {
    state.SkipWithError("needs two usable CPUs");
    return;
  }
  alignas(64) static std::atomic<std::uint64_t> ball{0};
  static std::atomic<bool> stop{false};
  ball.store(0);
  stop.store(false);
  std::thread echo([&] {
    pin_to(cpus[1]);
    for (std::uint64_t seen = 1; !stop.load(std::memory_order_relaxed);) {
      if (ball.load(std::memory_order_acquire) == seen) {
        ball.store(seen + 1, std::memory_order_release);
        seen += 2;
      }
    }
  });
  pin_to(cpus[0]);
  std::uint64_t next = 1;
  for (auto _ : state) {
    ball.store(next, std::memory_order_release);
    while (ball.load(std::memory_order_acquire) != next + 1) {
    }
    next += 2;
  }
  stop.store(true);
  echo.join();
  sched_setaffinity(0, sizeof(usable), &usable);
  state.SetLabel("cpus " + std::to_string(cpus[0]) + "," + std::to_string(cpus[1]));
}
BENCHMARK(BM_CoreRoundTrip)->UseRealTime();

// One core's speed alone: 4096 float additions of L1-resident data per iteration on the n-th
// usable CPU, no memory traffic and no other thread. With --benchmark_repetitions it shows
// whether the machine's cores keep one speed: on the development VM the two vCPUs ran it 1.4-3x
// apart, and one vCPU's time changed by 1.7x between repetitions, with no steal time counted.
void BM_CoreSpeed(benchmark::State& state) {
  const cpu_set_t usable = tpcomm::transport::cpu::current_cpus();
  const auto cpus = first_two_cpus();
  const auto nth = static_cast<std::size_t>(state.range(0));
  if (nth >= cpus.size()) {
    state.SkipWithError("this machine has fewer usable CPUs");
    return;
  }
  pin_to(cpus[nth]);
  std::vector<float> x(4096, 1.0f), y(4096, 2.0f);
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  sched_setaffinity(0, sizeof(usable), &usable);
  state.SetLabel("cpu " + std::to_string(cpus[nth]));
}
BENCHMARK(BM_CoreSpeed)->ArgName("nth_cpu")->Arg(0)->Arg(1);

// A W = 2 one-shot all-reduce of float32s between two pinned threads, without tpcomm's protocol
// (only its best reduction kernel), as DeepSpeed's and vLLM's CPU all-reduces do it: each copies
// its input into its lane (two per thread, by round parity, so a lane is rewritten only after the
// peer has said it finished reading it), raises its flag, waits for the peer's, then sums the
// peer's lane and its own input into its output. Run with --benchmark_repetitions: the same
// pages serve every repetition, so a time that changes between them changes with the machine
// (the host's placement of the vCPUs, its other guests), not with where a run's pages landed.
// turns:1 has the two threads' lanes take turns as tpcomm's W = 2 slots do (step_slot): a thread
// fills the lane it read from its peer two rounds before, lines already its own to write;
// turns:0 has each fill its own lanes, lines the peer read last.
void BM_LaneExchange(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0)) / sizeof(float);
  const bool turns = state.range(1) != 0;
  const cpu_set_t usable = tpcomm::transport::cpu::current_cpus();
  const auto cpus = first_two_cpus();
  if (cpus.size() < 2) {
    state.SkipWithError("needs two usable CPUs");
    return;
  }
  struct alignas(64) Side {
    std::atomic<std::uint64_t> flag{0};
    std::vector<float> in, out, lanes[2];
  };
  Side sides[2];
  for (int me = 0; me < 2; ++me) {
    sides[me].in.assign(count, static_cast<float>(me + 1));
    sides[me].out.assign(count, 0.0f);
    for (auto& lane : sides[me].lanes) lane.assign(count, 0.0f);
  }
  std::atomic<bool> stop{false};
  // One call on side `me`; false when stopped while waiting for the peer.
  auto call = [&](int me, std::uint64_t round) {
    Side& mine = sides[me];
    const Side& peer = sides[1 - me];
    const std::size_t turn = turns ? round / 2 : 0;
    std::vector<float>& fill = sides[(static_cast<std::size_t>(me) + turn) % 2].lanes[round % 2];
    const std::vector<float>& read =
        sides[(static_cast<std::size_t>(1 - me) + turn) % 2].lanes[round % 2];
    std::memcpy(fill.data(), mine.in.data(), count * sizeof(float));
    mine.flag.store(round, std::memory_order_release);
    while (peer.flag.load(std::memory_order_acquire) < round) {
      if (stop.load(std::memory_order_relaxed)) return false;
    }
    const void* both[2] = {mine.in.data(), read.data()};
    tpcomm::transport::cpu::team_reduce(nullptr, both, 2, count, tpcomm::DataType::kFloat32,
                                        tpcomm::ReduceOp::kSum, mine.out.data());
    return true;
  };
  std::thread echo([&] {
    pin_to(cpus[1]);
    for (std::uint64_t round = 1; call(1, round); ++round) {
    }
  });
  pin_to(cpus[0]);
  std::uint64_t round = 1;
  for (auto _ : state) call(0, round++);
  stop.store(true);
  echo.join();
  bool right = true;
  for (int me = 0; me < 2; ++me) {
    for (float v : sides[me].out) right &= v == 3.0f;
  }
  if (!right) state.SkipWithError("a sum came out wrong");
  sched_setaffinity(0, sizeof(usable), &usable);
}
// tpcomm bench's sizes, 4 KiB to 16 MiB by 4x, each with and without the turns.
BENCHMARK(BM_LaneExchange)
    ->ArgNames({"bytes", "turns"})
    ->ArgsProduct({benchmark::CreateRange(4 << 10, 16 << 20, 4), {0, 1}})
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
