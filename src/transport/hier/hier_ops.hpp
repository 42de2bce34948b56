// Each op hier runs, as stages on the node group (shm) and along the lane (Gloo or MPI):
// hier_stages.hpp. Floating-point reductions run in fp32 throughout and round once at the end
// (hier_stage_type.hpp); every other op moves the call's own elements.
#pragma once

#include "hier_stages.hpp"

namespace tpcomm::transport {

// hier_collectives.cpp: the reductions and the all-gather.
void hier_all_reduce(HierStages& s, const Call& c);
void hier_all_gather(HierStages& s, const Call& c);
void hier_reduce_scatter(HierStages& s, const Call& c);
void hier_reduce(HierStages& s, const Call& c);
// The all-gather's stages for `count` elements of `type` per rank, as stages of `outer` (the
// all-gather itself, or all_to_allv's exchange of counts).
void hier_gather_blocks(HierStages& s, const Call& outer, const void* input, void* output,
                        std::size_t count, DataType type);
// hier_vector_ops.cpp: per-rank counts.
void hier_all_gatherv(HierStages& s, const Call& c);
void hier_reduce_scatterv(HierStages& s, const Call& c);
// hier_exchanges.cpp
void hier_all_to_all(HierStages& s, const Call& c);
void hier_all_to_allv(HierStages& s, const Call& c);
// hier_rooted.cpp
void hier_gather(HierStages& s, const Call& c);
void hier_scatter(HierStages& s, const Call& c);

}  // namespace tpcomm::transport
