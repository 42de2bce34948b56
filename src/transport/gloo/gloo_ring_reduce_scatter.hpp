// A reduce-scatter over Gloo's pairs: Gloo ships no reduce-scatter for its context-based API, and
// an all-reduce of the whole input sends twice the bytes a reduce-scatter needs.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tpcomm/types.hpp"

namespace tpcomm::transport {

// c[i] = a[i] (op) b[i] over n fp32 values; c may be a or b.
using GlooReduceFn = void (*)(void* c, const void* a, const void* b, std::size_t n);

// Room a ring keeps from call to call: one block in flight, in fp32 and as the call's type.
struct GlooRingScratch {
  std::vector<float> received;
  std::vector<std::uint8_t> received_raw;
};

// `data` holds context.size blocks of `block` fp32 values, this rank's contribution to each, and
// `raw` the same values in the call's type `type` (data itself for float32); afterwards block
// context.rank of `data` holds the reduction of every rank's block context.rank (the other blocks
// hold partial sums). A ring: in each of size - 1 steps a rank sends one block to the next rank
// and folds the previous rank's into its own, so (size - 1) / size of the input crosses the wire
// and each block is reduced once, on one rank, in fp32. The first step sends a rank's own values
// as they are (fp16 / bf16: half the bytes of fp32, and the same values); later steps send fp32
// partial sums, which rounding to the call's type would change. Throws gloo::IoException on a
// timeout or a dead or closed pair.
void gloo_ring_reduce_scatter(gloo::Context& context, float* data, const void* raw, DataType type,
                              std::size_t block, GlooReduceFn reduce, std::uint32_t tag,
                              std::chrono::milliseconds timeout, GlooRingScratch& scratch);

}  // namespace tpcomm::transport
