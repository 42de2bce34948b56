// The shm backend's reduction kernels alone (no synchronisation): GB/s of input read per dtype,
// for the ISA dispatched on this CPU, to separate arithmetic from waiting in tpcomm bench; and
// the machine's memory-copy bandwidth beside them, the scale for tpcomm bench's bus bandwidth.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "transport/shm/shm_reduce.hpp"

namespace {

void BM_ReduceSlots(benchmark::State& state, tpcomm::DataType type) {
  const int ranks = static_cast<int>(state.range(0));
  const std::size_t count = static_cast<std::size_t>(state.range(1));
  const std::size_t es = tpcomm::size_of(type);
  std::vector<std::vector<std::uint8_t>> slots(static_cast<std::size_t>(ranks),
                                               std::vector<std::uint8_t>(count * es, 1));
  std::vector<const void*> srcs;
  for (auto& s : slots) srcs.push_back(s.data());
  std::vector<std::uint8_t> out(count * es);
  for (auto _ : state) {
    tpcomm::transport::shm::reduce_slots(srcs.data(), ranks, count, type, tpcomm::ReduceOp::kSum,
                                         out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * ranks *
                          static_cast<std::int64_t>(count * es));
  state.SetLabel(tpcomm::transport::shm::kernel_isa());
}

BENCHMARK_CAPTURE(BM_ReduceSlots, float32, tpcomm::DataType::kFloat32)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, bfloat16, tpcomm::DataType::kBFloat16)
    ->Args({2, 1 << 16})
    ->Args({4, 1 << 16})
    ->Args({2, 1 << 20});
BENCHMARK_CAPTURE(BM_ReduceSlots, float16, tpcomm::DataType::kFloat16)
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
