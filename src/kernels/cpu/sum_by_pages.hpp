// A W = 2 float32 sum that reads its sources 8 pages (32 KiB) at a time, a register from each page
// in turn: for a source in another core's cache (shm's lanes), whose lines then come in over 8
// streams at once instead of one. A core reading 256 KiB another had just written and adding a
// local buffer took 13.5-14.4 us in order and 10.6-11.9 this way; but on sources in this core's
// own cache it is up to 2x slower than reduce_slots_with (reduce_bench, BM_SumTwoByPages), so
// only shm's one-shot calls it. Each element gets the operation reduce_slots_with gives it, so the
// results are the same bits.
#pragma once

#include <cstddef>

#include "reduce.hpp"

namespace tpcomm::kernels::cpu {

// out[i] = srcs[0][i] + srcs[1][i] in float32 for i in [0, count), through the variant `isa`;
// out may alias either source. The caller checks cpu_runs(isa) first.
void sum_two_f32_by_pages_with(KernelIsa isa, const void* const* srcs, std::size_t count,
                               void* out);

// Below this many bytes a call is one reduce_slots_with (not a whole group of pages).
constexpr std::size_t kSumByPagesMinBytes = 32 << 10;

}  // namespace tpcomm::kernels::cpu
