// Reductions of integer elements, shared by the CPU backends: exact, a sum wrapping around as
// two's complement does (NCCL's and Gloo's integer sums alike), max and min by value. The order of
// the ranks cannot change an integer result, so every backend and every rank agrees bit for bit
// without the fp32 discipline of the floating-point kernels. One portable loop serves every CPU:
// integer calls carry indices and counts, not activations.
#pragma once

#include <cstddef>

#include "tpcomm/types.hpp"

namespace tpcomm::kernels::cpu {

// out[i] = op over r of srcs[r][i], for i in [0, count); `out` may alias a source. `type` is an
// integer type and `op` is not kAvg (the communicator refuses both before a call starts).
void reduce_ints(const void* const* srcs, int ranks, std::size_t count, DataType type, ReduceOp op,
                 void* out);

}  // namespace tpcomm::kernels::cpu
