// Integer all-reduces and reduce-scatters over Gloo, exact (two's complement wrap-around, as
// NCCL's), on a job's staged call.
#pragma once

#include "gloo_group.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::transport {

// Integers, larger than the opening exchange carries: an all-reduce in place in the job's copy
// (staged in `output`); a reduce-scatter all-reduces the job's copy of its whole input and keeps
// its block.
void reduce_integer_call(const GlooGroup& g, const Call& c);

}  // namespace tpcomm::transport
