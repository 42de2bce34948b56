// Deterministic mode's ordered form, the part host and device buffers share: the stage that
// brings every rank's raw input of a reduction to this rank (all_gather for all_reduce and
// reduce_scatterv, all_to_all for reduce_scatter, gather to the root for reduce), and where the
// blocks to sum in rank order then lie. The runtime sums them with the CPU kernels
// (runtime/ordered_reduction.cpp), NCCL's backend with its rank-order kernel
// (nccl/nccl_composed_calls.cpp).
#pragma once

#include <cstddef>

#include "backend.hpp"
#include "call_stage.hpp"

namespace tpcomm::transport {

struct OrderedGather {
  Call stage;              // run it through the backend
  std::size_t offset = 0;  // bytes into the gathered buffer of rank 0's block to sum
  std::size_t stride = 0;  // bytes from one rank's block to the next
  std::size_t count = 0;   // elements to sum from each block
  bool sums_here = true;   // false off reduce's root, which gets nothing
};

// Elements the gathered buffer holds: size x count (every rank's all_reduce or reduce input,
// reduce_scatterv's whole input, whose count is the blocks' sum, or reduce_scatter's block for
// this rank from every rank).
inline std::size_t gathered_elements(const Call& call, int size) {
  return static_cast<std::size_t>(size) * call.count;
}

// The gathering stage of reduction `call` on rank `rank` into `gathered`; kInternal for an op
// that is no reduction.
OrderedGather ordered_gather(const Call& call, int rank, void* gathered);

}  // namespace tpcomm::transport
