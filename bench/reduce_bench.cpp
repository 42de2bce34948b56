// The shm backend's reduction kernels alone (no synchronisation): GB/s of input read per dtype
// and per ISA variant (each called by name; one this CPU cannot run is skipped with the reason),
// to separate arithmetic from waiting in tpcomm bench; and
// the machine's memory-copy bandwidth beside them, the scale for tpcomm bench's bus bandwidth.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "transport/shm/shm_reduce.hpp"

namespace {

using tpcomm::transport::shm::KernelIsa;

void BM_ReduceSlots(benchmark::State& state, tpcomm::DataType type, KernelIsa isa) {
  if (!tpcomm::transport::shm::cpu_runs(isa)) {
    state.SkipWithError("this CPU cannot run this variant");
    return;
  }
  const int ranks = static_cast<int>(state.range(0));
  const std::size_t count = static_cast<std::size_t>(state.range(1));
  const std::size_t es = tpcomm::size_of(type);
  std::vector<std::vector<std::uint8_t>> slots(static_cast<std::size_t>(ranks),
                                               std::vector<std::uint8_t>(count * es, 1));
  std::vector<const void*> srcs;
  for (auto& s : slots) srcs.push_back(s.data());
  std::vector<std::uint8_t> out(count * es);
  for (auto _ : state) {
    tpcomm::transport::shm::reduce_slots_with(isa, srcs.data(), ranks, count, type,
                                              tpcomm::ReduceOp::kSum, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * ranks *
                          static_cast<std::int64_t>(count * es));
  state.SetLabel(tpcomm::transport::shm::to_string(isa));
}

BENCHMARK_CAPTURE(BM_ReduceSlots, float32_avx512, tpcomm::DataType::kFloat32, KernelIsa::kAvx512)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, float32_avx2, tpcomm::DataType::kFloat32, KernelIsa::kAvx2)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, float32_baseline, tpcomm::DataType::kFloat32,
                  KernelIsa::kBaseline)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, bfloat16_avx512bf16, tpcomm::DataType::kBFloat16,
                  KernelIsa::kAvx512Bf16)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, bfloat16_avx512, tpcomm::DataType::kBFloat16, KernelIsa::kAvx512)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, bfloat16_avx2, tpcomm::DataType::kBFloat16, KernelIsa::kAvx2)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, bfloat16_baseline, tpcomm::DataType::kBFloat16,
                  KernelIsa::kBaseline)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, float16_avx512, tpcomm::DataType::kFloat16, KernelIsa::kAvx512)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, float16_avx2, tpcomm::DataType::kFloat16, KernelIsa::kAvx2)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, float16_baseline, tpcomm::DataType::kFloat16,
                  KernelIsa::kBaseline)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});

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
