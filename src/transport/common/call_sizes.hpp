// The size of each buffer of a call on one rank, in elements: the one place that knows each
// operation's shapes (the communicator checks them, backends stage and split by them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>

#include "backend.hpp"

namespace tpcomm::transport {

// Whether the call is all_gatherv or reduce_scatterv: per-rank counts (`recv_counts`, the same
// on every rank) and `count` their sum.
inline bool per_rank_counts(const Call& c) {
  return (c.op == Op::kAllGather || c.op == Op::kReduceScatter) && c.recv_counts != nullptr;
}

// Elements of all_to_allv's blocks: the sum of `counts` (size() of them).
inline std::size_t sum_of(const std::size_t* counts, int size) {
  return counts == nullptr ? 0 : std::accumulate(counts, counts + size, std::size_t{0});
}

// all_gatherv's and reduce_scatterv's Call::counts_digest: FNV-1a of the `size` counts in 32
// bits, never 0 or 1 (which say "no counts" and "all_to_allv").
inline std::uint32_t counts_digest(const std::size_t* counts, std::size_t size) {
  std::uint32_t h = 2166136261u;
  for (std::size_t r = 0; r < size; ++r) {
    for (int b = 0; b < 8; ++b)
      h = (h ^ static_cast<std::uint8_t>(counts[r] >> (8 * b))) * 16777619u;
  }
  return h < 2 ? h + 2 : h;
}

// The input `rank` passes (0 where it passes none: scatter off the root).
inline std::size_t input_elements(const Call& c, int rank, int size) {
  const auto w = static_cast<std::size_t>(size);
  if (per_rank_counts(c)) {
    return c.op == Op::kAllGather ? c.recv_counts[static_cast<std::size_t>(rank)] : c.count;
  }
  switch (c.op) {
    case Op::kReduceScatter:
      return c.count * w;
    case Op::kAllToAll:
      return c.send_counts != nullptr ? sum_of(c.send_counts, size) : c.count * w;
    case Op::kScatter:
      return rank == c.root ? c.count * w : 0;
    default:
      return c.count;
  }
}

// The output `rank` receives (0 where it receives none: gather and reduce off the root).
inline std::size_t output_elements(const Call& c, int rank, int size) {
  const auto w = static_cast<std::size_t>(size);
  if (per_rank_counts(c)) {
    return c.op == Op::kAllGather ? c.count : c.recv_counts[static_cast<std::size_t>(rank)];
  }
  switch (c.op) {
    case Op::kAllGather:
      return c.count * w;
    case Op::kAllToAll:
      return c.recv_counts != nullptr ? sum_of(c.recv_counts, size) : c.count * w;
    case Op::kGather:
      return rank == c.root ? c.count * w : 0;
    case Op::kReduce:
      return rank == c.root ? c.count : 0;
    default:
      return c.count;
  }
}

}  // namespace tpcomm::transport
