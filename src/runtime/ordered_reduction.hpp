// Deterministic mode (docs/communicator.md) on a backend whose reductions do not keep rank order
// (keeps_rank_order in tuning.hpp: gloo's ring, hier's per-node partial sums): the raw inputs
// gathered through that backend (all_gather, all_to_all or gather, a stage of the user's call
// compared across ranks like any), then summed here in rank order 0..W-1 by the CPU reduction
// kernels (fp32 accumulation for 16-bit types, one rounding), whose every variant and chunk gives
// the same bits. Integer reductions are exact in any order and never come here.
#pragma once

#include <cstddef>
#include <vector>

#include "tpcomm/plan.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::runtime {

// Whether `call`, routed to `backend` under `plan`, takes the ordered form.
bool takes_ordered_form(const Plan& plan, Backend backend, const transport::Call& call);

// Runs a reduction (all_reduce, reduce_scatter(v), reduce) of rank `rank` of `size` in the ordered
// form; `scratch` is kept between calls (it grows to size x the largest input).
void run_ordered(transport::CollectiveBackend& backend, const transport::Call& call, int rank,
                 int size, std::vector<std::byte>& scratch);

}  // namespace tpcomm::runtime
