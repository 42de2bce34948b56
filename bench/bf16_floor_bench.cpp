// The floor under reduce_bench's bf16 rows: what a W = 2 bf16 sum costs per ISA variant before
// any rounding (docs/bench.md). A binary of its own so that its buffers do not move
// reduce_bench's: the baseline fp16 kernel's stack blocks ran 50% slower when they did.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "transport/shm/shm_reduce.hpp"

namespace {

using tpcomm::transport::shm::KernelIsa;

// The floor of any bf16 sum accumulated in fp32, which the kernels do so that every variant gets
// the same bits: each source's pairs widened (a shift, a mask), two additions, and the results'
// top halves packed back (a shift, a word blend) without rounding. Wrong results on purpose; its
// time, over float32's, is the least a bf16 kernel of that kind can take per variant, so the
// rounding is what the kernels add to it. Written with GCC's vector extensions, compiled per
// variant as the kernels are.
template <typename U, typename F, typename Words, std::size_t... K>
inline __attribute__((always_inline)) void bf16_floor(const std::uint8_t* a, const std::uint8_t* b,
                                                      std::uint8_t* out, std::size_t bytes,
                                                      std::index_sequence<K...>) {
  constexpr Words kOddFromSecond{static_cast<std::uint16_t>(K % 2 == 0 ? K : sizeof(U) / 2 + K)...};
  for (std::size_t i = 0; i + sizeof(U) <= bytes; i += sizeof(U)) {
    U x;
    U y;
    std::memcpy(&x, a + i, sizeof(U));
    std::memcpy(&y, b + i, sizeof(U));
    const F even = reinterpret_cast<F>(x << 16) + reinterpret_cast<F>(y << 16);
    const F odd = reinterpret_cast<F>(x & 0xffff0000u) + reinterpret_cast<F>(y & 0xffff0000u);
    const U top_even = reinterpret_cast<U>(even) >> 16;
    if constexpr (sizeof(U) == 16) {  // SSE2 has no word blend (GCC would go element by element)
      const U packed = top_even | (reinterpret_cast<U>(odd) & 0xffff0000u);
      std::memcpy(out + i, &packed, sizeof(U));
    } else {
      const Words packed = __builtin_shuffle(reinterpret_cast<Words>(top_even),
                                             reinterpret_cast<Words>(odd), kOddFromSecond);
      std::memcpy(out + i, &packed, sizeof(U));
    }
  }
}
#define TPCOMM_BF16_FLOOR(NAME, TARGET, BYTES)                                      \
  TARGET void NAME(const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* out, \
                   std::size_t bytes) {                                             \
    bf16_floor<std::uint32_t __attribute__((vector_size(BYTES))),                   \
               float __attribute__((vector_size(BYTES))),                           \
               std::uint16_t __attribute__((vector_size(BYTES)))>(                  \
        a, b, out, bytes, std::make_index_sequence<BYTES / 2>());                   \
  }
TPCOMM_BF16_FLOOR(bf16_floor_avx512, __attribute__((target("arch=x86-64-v4"))), 64)
TPCOMM_BF16_FLOOR(bf16_floor_avx2, __attribute__((target("arch=x86-64-v3"))), 32)
TPCOMM_BF16_FLOOR(bf16_floor_baseline, , 16)
#undef TPCOMM_BF16_FLOOR

void BM_Bf16Floor(benchmark::State& state, KernelIsa isa) {
  if (!tpcomm::transport::shm::cpu_runs(isa)) {
    state.SkipWithError("this CPU cannot run this variant");
    return;
  }
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<std::uint8_t> a(bytes, 0x3f), b(bytes, 0x40), out(bytes);
  auto* floor = isa == KernelIsa::kAvx2       ? bf16_floor_avx2
                : isa == KernelIsa::kBaseline ? bf16_floor_baseline
                                              : bf16_floor_avx512;
  for (auto _ : state) {
    floor(a.data(), b.data(), out.data(), bytes);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 *
                          static_cast<std::int64_t>(bytes));
  state.SetLabel(tpcomm::transport::shm::to_string(isa));
}
const bool kFloorRegistered = [] {
  for (KernelIsa isa : {KernelIsa::kAvx512, KernelIsa::kAvx2, KernelIsa::kBaseline}) {
    const std::string name =
        std::string("BM_Bf16Floor/") + tpcomm::transport::shm::to_string(isa) + "/ranks:2";
    benchmark::RegisterBenchmark(name.c_str(), BM_Bf16Floor, isa)
        ->ArgNames({"bytes"})
        ->Arg(64 << 10)
        ->Arg(256 << 10)
        ->Arg(4 << 20);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
