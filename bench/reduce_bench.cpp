// The shm backend's reduction kernels alone (no synchronisation): GB/s of input read per dtype
// and per ISA variant (each called by name; one this CPU cannot run is skipped with the reason),
// to separate arithmetic from waiting in tpcomm bench; and
// the machine's memory-copy bandwidth beside them, the scale for tpcomm bench's bus bandwidth.
// Sizes are bytes per rank, the same for every dtype, so bf16 and fp16 against float32 at one
// size is the "same bytes" comparison (half as many elements as float32's twice). At 8 KiB per
// rank every buffer stays in L1, so that row times the loop's instructions alone: its compute
// bound, which shows where a dtype's larger rows are bound by arithmetic rather than memory.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/add_rmsnorm.hpp"
#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/sum_by_pages.hpp"
#include "tpcomm/types.hpp"
#include "transport/cpu/team_ops.hpp"
#include "transport/cpu/thread_team.hpp"

namespace {

using tpcomm::kernels::cpu::KernelIsa;

// "BM_<what>/<dtype>_<variant>": every benchmark here is called by its variant's name.
std::string bench_name(const char* what, tpcomm::DataType type, KernelIsa isa) {
  return std::string(what) + "/" + std::string(tpcomm::to_string(type)) + "_" +
         tpcomm::kernels::cpu::to_string(isa);
}

// False, with the reason on the row, where this CPU cannot run the variant.
bool runs_here(benchmark::State& state, KernelIsa isa) {
  if (tpcomm::kernels::cpu::cpu_runs(isa)) return true;
  state.SkipWithError("this CPU cannot run this variant");
  return false;
}

// W ranks' slots of `bytes` each and an output. Values of activations' magnitudes, different per
// rank: the kernels' cost does not depend on them except through denormals, which this leaves out
// as real activations do.
struct Slots {
  Slots(int ranks, std::size_t bytes, tpcomm::DataType type) : out(bytes) {
    const std::size_t count = bytes / tpcomm::size_of(type);
    std::vector<float> values(count);
    for (int r = 0; r < ranks; ++r) {
      for (std::size_t i = 0; i < count; ++i)
        values[i] = static_cast<float>((i * 7 + r) % 997) / 97.f - 5.f;
      slots.emplace_back(bytes);
      tpcomm::from_float(values.data(), type, count, slots.back().data());
    }
    for (auto& s : slots) srcs.push_back(s.data());
  }
  std::vector<std::vector<std::uint8_t>> slots;
  std::vector<const void*> srcs;
  std::vector<std::uint8_t> out;
};

// GB/s of input read (every rank's slot), and the variant on the row.
void count_input(benchmark::State& state, int ranks, std::size_t bytes, KernelIsa isa) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * ranks *
                          static_cast<std::int64_t>(bytes));
  state.SetLabel(tpcomm::kernels::cpu::to_string(isa));
}

void BM_ReduceSlots(benchmark::State& state, tpcomm::DataType type, KernelIsa isa) {
  if (!runs_here(state, isa)) return;
  const int ranks = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const std::size_t count = bytes / tpcomm::size_of(type);
  Slots in(ranks, bytes, type);
  for (auto _ : state) {
    tpcomm::kernels::cpu::reduce_slots_with(isa, in.srcs.data(), ranks, count, type,
                                            tpcomm::ReduceOp::kSum, in.out.data());
    benchmark::DoNotOptimize(in.out.data());
  }
  count_input(state, ranks, bytes, isa);
}

// Every dtype with every variant that has its own code for it (fp16 has no AVX512-BF16 kernel).
const bool kRegistered = [] {
  using tpcomm::DataType;
  for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    for (KernelIsa isa : tpcomm::kernels::cpu::kAllKernelIsas) {
      if (isa == KernelIsa::kAvx512Bf16 && type != DataType::kBFloat16) continue;
      const std::string name = bench_name("BM_ReduceSlots", type, isa);
      benchmark::RegisterBenchmark(name.c_str(), BM_ReduceSlots, type, isa)
          ->ArgNames({"ranks", "bytes"})
          ->Args({2, 8 << 10})
          ->Args({2, 64 << 10})
          ->Args({2, 256 << 10})
          ->Args({4, 256 << 10})
          ->Args({2, 4 << 20});
    }
  }
  return true;
}();

// all_reduce_rmsnorm's epilogue alone (add_rmsnorm.hpp): two ranks' rows summed, a residual
// added, each row normalised; rows x hidden elements per rank, the sizes of the measure
// (a decode step's few rows to a prefill's 512). GB/s of input read, as BM_ReduceSlots.
void BM_AddRmsNorm(benchmark::State& state, tpcomm::DataType type, KernelIsa isa) {
  if (!runs_here(state, isa)) return;
  const auto rows = static_cast<std::size_t>(state.range(0));
  const auto hidden = static_cast<std::size_t>(state.range(1));
  const std::size_t bytes = rows * hidden * tpcomm::size_of(type);
  Slots in(3, bytes, type);  // two ranks' rows and the residual
  Slots weight(1, hidden * tpcomm::size_of(type), type);
  std::vector<std::uint8_t> residual_out(bytes);
  tpcomm::RmsNorm norm;
  norm.residual = in.srcs[2];
  norm.weight = weight.srcs[0];
  norm.residual_out = residual_out.data();
  norm.hidden = hidden;
  for (auto _ : state) {
    tpcomm::kernels::cpu::add_rmsnorm_rows_with(isa, in.srcs.data(), 2, type, rows, type, norm,
                                                in.out.data());
    benchmark::DoNotOptimize(in.out.data());
  }
  count_input(state, 2, bytes, isa);
}

const bool kNormRegistered = [] {
  using tpcomm::DataType;
  for (DataType type : {DataType::kFloat32, DataType::kBFloat16}) {
    for (KernelIsa isa : tpcomm::kernels::cpu::kAllKernelIsas) {
      if (isa == KernelIsa::kAvx512Bf16) continue;  // the AVX-512 code serves it
      const std::string name = bench_name("BM_AddRmsNorm", type, isa);
      benchmark::RegisterBenchmark(name.c_str(), BM_AddRmsNorm, type, isa)
          ->ArgNames({"rows", "hidden"})
          ->ArgsProduct({{1, 8, 64, 512}, {4096, 8192}});
    }
  }
  return true;
}();

// shm's W = 2 float32 sum by pages (sum_by_pages.hpp) on sources in this core's cache: the case
// it is not made for, where it is slower than BM_ReduceSlots; with one source in another core's
// cache it is faster, which tpcomm bench shows (docs/results/cpu-2026-12-05-impi.md).
void BM_SumTwoByPages(benchmark::State& state, KernelIsa isa) {
  if (!runs_here(state, isa)) return;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Slots in(2, bytes, tpcomm::DataType::kFloat32);
  for (auto _ : state) {
    tpcomm::kernels::cpu::sum_two_f32_by_pages_with(isa, in.srcs.data(), bytes / sizeof(float),
                                                    in.out.data());
    benchmark::DoNotOptimize(in.out.data());
  }
  count_input(state, 2, bytes, isa);
}

const bool kByPagesRegistered = [] {
  for (KernelIsa isa : {KernelIsa::kAvx512, KernelIsa::kAvx2, KernelIsa::kBaseline}) {
    const std::string name = bench_name("BM_SumTwoByPages", tpcomm::DataType::kFloat32, isa);
    benchmark::RegisterBenchmark(name.c_str(), BM_SumTwoByPages, isa)
        ->ArgNames({"bytes"})
        ->Arg(64 << 10)
        ->Arg(256 << 10)
        ->Arg(4 << 20);
  }
  return true;
}();

// One reduction split over a team of `threads` (the caller among them), as the shm backend runs
// calls from the tuning table's team_min_bytes: bytes per rank as above, W = 2 and 4, float32
// and bfloat16, 1 and 2 threads (the team's scaling on this machine's cores; more threads than
// cores only measure the scheduler). The team is made once, outside the timing, as a
// communicator makes it at set-up.
void BM_TeamReduce(benchmark::State& state, tpcomm::DataType type, KernelIsa isa) {
  if (!runs_here(state, isa)) return;
  const int ranks = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const std::size_t count = bytes / tpcomm::size_of(type);
  Slots in(ranks, bytes, type);
  tpcomm::transport::cpu::ThreadTeam team(threads);
  for (auto _ : state) {
    tpcomm::transport::cpu::team_reduce(&team, isa, in.srcs.data(), ranks, count, type,
                                        tpcomm::ReduceOp::kSum, in.out.data());
    benchmark::DoNotOptimize(in.out.data());
  }
  count_input(state, ranks, bytes, isa);
}

// The ceiling for BM_TeamReduce's scaling on this machine: `threads` independent reductions at
// once (Google Benchmark's ->Threads), each of its own W slots of bytes / threads, the share a
// team thread gets, with no team to wake or wait for. Where two of them together reach only
// 1.5x one, no team of two can reach more: the cores' caches and memory are the limit.
void BM_TeamCeiling(benchmark::State& state, tpcomm::DataType type, KernelIsa isa) {
  if (!runs_here(state, isa)) return;
  const int ranks = static_cast<int>(state.range(0));
  const auto bytes =
      static_cast<std::size_t>(state.range(1)) / static_cast<std::size_t>(state.threads());
  const std::size_t count = bytes / tpcomm::size_of(type);
  Slots in(ranks, bytes, type);
  for (auto _ : state) {
    tpcomm::transport::cpu::team_reduce(nullptr, isa, in.srcs.data(), ranks, count, type,
                                        tpcomm::ReduceOp::kSum, in.out.data());
    benchmark::DoNotOptimize(in.out.data());
  }
  count_input(state, ranks, bytes, isa);
}

// The same reduction split the way the CPU paths of vLLM, SGLang and DeepSpeed split theirs: an
// OpenMP parallel loop over fixed blocks of the output (schedule(static), blocks of 16 Ki
// elements), `threads` threads, with tpcomm's kernel inside, so the two differ only in how the
// work is shared and the threads woken (OpenMP's own pool, which spins a while after a region
// by default: OMP_WAIT_POLICY, GOMP_SPINCOUNT).
void BM_OmpReduce(benchmark::State& state, tpcomm::DataType type, KernelIsa isa) {
#if TPCOMM_HAVE_OPENMP
  if (!runs_here(state, isa)) return;
  const int ranks = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const std::size_t es = tpcomm::size_of(type);
  const std::size_t count = bytes / es;
  Slots in(ranks, bytes, type);
  constexpr std::size_t kBlock = 16 << 10;  // elements
  const auto blocks = static_cast<long>((count + kBlock - 1) / kBlock);
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long b = 0; b < blocks; ++b) {
      const std::size_t first = static_cast<std::size_t>(b) * kBlock;
      const void* mine[8];
      for (int r = 0; r < ranks; ++r)
        mine[r] =
            static_cast<const std::uint8_t*>(in.srcs[static_cast<std::size_t>(r)]) + first * es;
      tpcomm::kernels::cpu::reduce_slots_with(isa, mine, ranks, std::min(kBlock, count - first),
                                              type, tpcomm::ReduceOp::kSum,
                                              in.out.data() + first * es);
    }
    benchmark::DoNotOptimize(in.out.data());
  }
  count_input(state, ranks, bytes, isa);
#else
  (void)type;
  (void)isa;
  state.SkipWithError("reduce_bench was built without OpenMP (CMake found none)");
#endif
}

const bool kTeamRegistered = [] {
  using tpcomm::DataType;
  for (DataType type : {DataType::kFloat32, DataType::kBFloat16}) {
    for (KernelIsa isa : tpcomm::kernels::cpu::kAllKernelIsas) {
      if (isa == KernelIsa::kAvx512Bf16 && type != DataType::kBFloat16) continue;
      const std::string name = bench_name("BM_TeamReduce", type, isa);
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_TeamReduce, type, isa)
                    ->ArgNames({"ranks", "bytes", "threads"})
                    ->UseRealTime();
      for (int ranks : {2, 4}) {
        for (int bytes : {256 << 10, 1 << 20, 4 << 20, 16 << 20}) {
          for (int threads : {1, 2}) b->Args({ranks, bytes, threads});
        }
      }
      const std::string omp = bench_name("BM_OmpReduce", type, isa);
      benchmark::RegisterBenchmark(omp.c_str(), BM_OmpReduce, type, isa)
          ->ArgNames({"ranks", "bytes", "threads"})
          ->ArgsProduct({{2, 4}, {256 << 10, 1 << 20, 4 << 20, 16 << 20}, {1, 2}})
          ->UseRealTime();
      const std::string ceiling = bench_name("BM_TeamCeiling", type, isa);
      benchmark::RegisterBenchmark(ceiling.c_str(), BM_TeamCeiling, type, isa)
          ->ArgNames({"ranks", "bytes"})
          ->ArgsProduct({{2, 4}, {1 << 20, 4 << 20, 16 << 20}})
          ->Threads(1)
          ->Threads(2)
          ->UseRealTime();
    }
  }
  return true;
}();

// memcpy of one buffer into another (bytes copied per second), cache-resident to DRAM-sized.
void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<std::uint8_t> from(bytes, 1), to(bytes);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::DoNotOptimize(to.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_Memcpy)->Arg(1 << 16)->Arg(1 << 20)->Arg(16 << 20);

}  // namespace

BENCHMARK_MAIN();
