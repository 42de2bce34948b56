// The data of tpcomm bench: rank-dependent inputs whose every result is exact, the buffer sizes
// of each operation, and the #wrong check against a reference computed here.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tpcomm/types.hpp"

namespace tpcomm::cli {

// The bus-bandwidth factor of nccl-tests.
double bus_factor(Op op, int w);

// Elements of input and output per rank for a call whose largest buffer is `bytes`.
std::pair<std::size_t, std::size_t> bench_counts(Op op, std::uint64_t bytes, std::size_t es, int w);

// `n` inputs of this rank in `type`: small integers, exact in every type and every sum.
std::vector<std::uint8_t> bench_input(std::size_t n, DataType type, int rank);

// Elements of this rank's `n_out` results that differ from the exact answer.
std::uint64_t count_wrong(Op op, ReduceOp redop, DataType type, const std::uint8_t* out,
                          std::size_t n_out, int rank, int w, std::size_t n_in_per_rank);

}  // namespace tpcomm::cli
