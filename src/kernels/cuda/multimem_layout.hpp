// What the multimem kernels and the host agree on (host/device functions, unit-tested on the
// host): the layout of one rank's multicast-bound workspace and how many elements one step of
// each operation moves.
//
// The workspace is one VMM allocation per rank, bound to the group's multicast object at offset
// 0, so the same offset names "this rank's copy" through the unicast mapping and "every rank's
// copy" through the multicast mapping:
//   [pads]     kPhases x kMaxBlocks 64-bit counters. A barrier adds 1 to a pad on every rank at
//              once (multimem.red through the multicast mapping) and waits on its own copy for
//              the next multiple of W; counters only grow.
//   [local]    this rank's own counters, never touched through the multicast mapping: the last
//              step number, finished blocks, and per pad the value the next barrier waits for.
//   [probe]    16 bytes for the set-up self-test.
//   [failed]   the group's failure word (kernel_codes.hpp): a kernel that gives up sets it on
//              every rank at once through the multicast mapping.
//   [data]     two areas used by step parity, as in the custom kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_layout.hpp"

namespace tpcomm::kernels::cuda {

struct MultimemLayout {
  std::size_t pads_offset = 0;
  std::size_t local_offset = 0;  // steps[0], steps[1], then kPhases x kMaxBlocks targets
  std::size_t probe_offset = 0;
  std::size_t failed_offset = 0;
  std::size_t data_offset = 0;
  std::size_t area_bytes = 0;  // each of the two data areas
  std::size_t total_bytes = 0;
};

// `granularity`: the larger of the VMM and multicast granularities.
TPCOMM_HD MultimemLayout multimem_layout(std::size_t area_bytes, std::size_t granularity) {
  MultimemLayout l;
  const std::size_t pads = sizeof(std::uint64_t) * kPhases * kMaxBlocks;
  l.local_offset = round_up(pads, 256);
  l.probe_offset =
      round_up(l.local_offset + sizeof(std::uint64_t) * (2 + kPhases * kMaxBlocks), 256);
  l.failed_offset = round_up(l.probe_offset + kVecBytes, 256);
  l.data_offset = round_up(l.failed_offset + sizeof(std::uint64_t), 4096);
  l.area_bytes = round_up(area_bytes, 4096);
  l.total_bytes = round_up(l.data_offset + 2 * l.area_bytes, granularity == 0 ? 1 : granularity);
  return l;
}

// How a data area is used, per operation and reduction:
//   all-reduce, sum: input copy, then the reduced result (switch reduction), half the area each;
//   reduce-scatter, sum: the W input blocks (each rank reduces its block from every copy);
//   all-gather, and all-reduce / reduce-scatter with max, min or avg: one slot per rank that
//   every rank stores its input into (then each rank reduces the slots in rank order).
enum class MultimemMode : int { kReduceSum = 0, kGather = 1 };

// Elements per rank that one step moves (whole 16-byte vectors, at least one).
TPCOMM_HD std::size_t multimem_chunk_elements(std::size_t area_bytes, std::size_t element_bytes,
                                              int world, bool reduce_scatter, MultimemMode mode) {
  const int blocks = reduce_scatter ? world : 1;
  const std::size_t usable = mode == MultimemMode::kGather
                                 ? area_bytes / static_cast<std::size_t>(world)
                                 : (reduce_scatter ? area_bytes : area_bytes / 2);
  return chunk_elements(usable, element_bytes, blocks);
}

}  // namespace tpcomm::kernels::cuda
