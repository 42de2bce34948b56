// all_reduce_rmsnorm on a backend that does not fuse it (fuses_rmsnorm: hier, hier_mpi, gloo,
// local): the input converted to float32, a float32 sum all-reduce through the backend (a stage
// of the user's call, compared across ranks with its rows and eps), then the add+norm kernel on
// each rank. The sum stays in float32 until the kernel rounds sum + residual once, as the fused
// path does; every rank gets the same sum from the backend, so the same bits.
#pragma once

#include <vector>

#include "common/function_ref.hpp"

#include "transport/common/backend.hpp"

namespace tpcomm::runtime {

// `call` is routed to a backend that `all_reduce` runs the fp32 sum through (in the ordered form
// in deterministic mode); `sums` is scratch kept between calls.
void run_unfused_rmsnorm(const transport::Call& call, std::vector<float>& sums,
                         common::FunctionRef<void(const transport::Call&)> all_reduce);

}  // namespace tpcomm::runtime
