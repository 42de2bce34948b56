// Reduction kernels of the shm backend: element-wise over the ranks' slots in rank order, fp32
// accumulation, fp16/bf16 rounded to nearest even once at the end. Compiled for AVX-512, AVX2
// and a portable baseline; the best for this CPU is chosen at run time (GCC target_clones).
// Every rank runs the same per-element order, so results are bitwise identical on every rank.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tpcomm/types.hpp"

namespace tpcomm::transport::shm {

// out[i] = op over r of srcs[r][i], for i in [0, count). `srcs` has `ranks` pointers. out may
// alias one of the sources.
void reduce_slots(const void* const* srcs, int ranks, std::size_t count, DataType type, ReduceOp op,
                  void* out);

// The ISA the kernels were dispatched to on this CPU ("avx512" for x86-64-v4, "avx2" or
// "baseline").
const char* kernel_isa();

}  // namespace tpcomm::transport::shm
