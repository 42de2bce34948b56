// A reduce-scatter over Gloo's pairs: Gloo ships no reduce-scatter for its context-based API, and
// an all-reduce of the whole input sends twice the bytes a reduce-scatter needs.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tpcomm::transport {

// c[i] = a[i] (op) b[i] over n fp32 values; c may be a or b.
using GlooReduceFn = void (*)(void* c, const void* a, const void* b, std::size_t n);

// `data` holds context.size blocks of `block` fp32 values, this rank's contribution to each;
// afterwards block context.rank holds the reduction of every rank's block context.rank (the other
// blocks hold partial sums). A ring: in each of size - 1 steps a rank sends one block to the next
// rank and folds the previous rank's into its own, so (size - 1) / size of the input crosses the
// wire and each block is reduced once, on one rank. `received`: room for one block, kept by the
// caller between calls. Throws gloo::IoException on a timeout or a dead or closed pair.
void gloo_ring_reduce_scatter(gloo::Context& context, float* data, std::size_t block,
                              GlooReduceFn reduce, std::uint32_t tag,
                              std::chrono::milliseconds timeout, std::vector<float>& received);

}  // namespace tpcomm::transport
