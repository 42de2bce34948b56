// The floor under reduce_bench's bf16 rows: what a W = 2 bf16 sum costs per ISA variant before
// any rounding (docs/bench.md). A binary of its own so that its buffers do not move
// reduce_bench's: the baseline fp16 kernel's stack blocks ran 50% slower when they did.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/reduce_bf16_pairs.hpp"

namespace {

using tpcomm::kernels::cpu::KernelIsa;

// The floor of any bf16 sum accumulated in fp32, which the kernels do so that every variant gets
// the same bits: each source's pairs widened (a shift, a mask), two additions, and the results'
// top halves packed back without rounding, with the kernels' own helpers
// (reduce_bf16_pairs.hpp). Wrong results on purpose; its time, over float32's, is the least a
// bf16 kernel of that kind can take per variant, so the rounding is what the kernels add to it.
// Compiled per variant as the kernels are.
namespace k = tpcomm::kernels::cpu::variants;
template <int B>
inline __attribute__((always_inline)) void bf16_floor(const std::uint8_t* a, const std::uint8_t* b,
                                                      std::uint8_t* out, std::size_t bytes) {
  auto one = [&](std::size_t i) __attribute__((always_inline)) {
    const k::VecU32<B> x = k::load_u32<B>(a + i);
    const k::VecU32<B> y = k::load_u32<B>(b + i);
    const k::VecF<B> even = k::bf16_even<B>(x) + k::bf16_even<B>(y);
    const k::VecF<B> odd = k::bf16_odd<B>(x) + k::bf16_odd<B>(y);
    k::VecU32<B> e;
    k::VecU32<B> o;
    std::memcpy(&e, &even, sizeof(e));
    std::memcpy(&o, &odd, sizeof(o));
    const k::VecU32<B> packed = k::pack_tops<B>(e, o);
    std::memcpy(out + i, &packed, sizeof(packed));
  };
  // The kernels' loop around it (reduce_bf16_pairs): a cache line of each source per iteration,
  // prefetched 2 KiB ahead. Without that the floor ran slower than the kernel at 4 MiB (Zen 5:
  // 263 against 166 us), so it was no floor there.
  const void* const srcs[2] = {a, b};
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    k::prefetch_line_ahead<1>(srcs, 2, i, bytes);
    for (std::size_t u = 0; u < 64; u += B) one(i + u);
  }
  for (; i + B <= bytes; i += B) one(i);
}
__attribute__((target("arch=x86-64-v4"))) void bf16_floor_avx512(const std::uint8_t* a,
                                                                 const std::uint8_t* b,
                                                                 std::uint8_t* out,
                                                                 std::size_t bytes) {
  bf16_floor<64>(a, b, out, bytes);
}
__attribute__((target("arch=x86-64-v3"))) void bf16_floor_avx2(const std::uint8_t* a,
                                                               const std::uint8_t* b,
                                                               std::uint8_t* out,
                                                               std::size_t bytes) {
  bf16_floor<32>(a, b, out, bytes);
}
void bf16_floor_baseline(const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* out,
                         std::size_t bytes) {
  bf16_floor<16>(a, b, out, bytes);
}

void BM_Bf16Floor(benchmark::State& state, KernelIsa isa) {
  if (!tpcomm::kernels::cpu::cpu_runs(isa)) {
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
  state.SetLabel(tpcomm::kernels::cpu::to_string(isa));
}
const bool kFloorRegistered = [] {
  for (KernelIsa isa : {KernelIsa::kAvx512, KernelIsa::kAvx2, KernelIsa::kBaseline}) {
    const std::string name =
        std::string("BM_Bf16Floor/") + tpcomm::kernels::cpu::to_string(isa) + "/ranks:2";
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
