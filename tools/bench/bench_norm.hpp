// tpcomm bench --op all_reduce_rmsnorm: rows of --hidden elements, a size being the input's bytes
// (at least one row). The fused call out of place (a new residual beside the old) and in place
// (vLLM's form: the norm over the input, the residual updated), and with --compare unfused the
// sequence an engine runs without the fusion: tpcomm's all_reduce in the call's type, then a
// separate add+norm kernel of the same ISA over its result. --check compares every element with
// a float64 reference (bench_data.hpp's exact inputs: the sums are exact, the norm within 2
// units in the last place).
#pragma once

#include <cstdint>

#include "bench.hpp"
#include "bench_report.hpp"
#include "tpcomm/communicator.hpp"

namespace tpcomm::cli {

BenchRow measure_norm(const BenchArgs& a, Communicator& comm, Bootstrap& bs, std::uint64_t bytes);

}  // namespace tpcomm::cli
