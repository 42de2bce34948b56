// Deterministic mode's gathering stage (ordered_gather.hpp).
#include "ordered_gather.hpp"

#include <fmt/format.h>

#include "call_sizes.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport {

OrderedGather ordered_gather(const Call& call, int rank, void* gathered) {
  const std::size_t es = size_of(call.type);
  OrderedGather g{stage_of(call, Op::kAllGather, call.input, gathered, call.count), 0,
                  call.count * es, call.count, true};
  switch (call.op) {
    case Op::kAllReduce:
      return g;
    case Op::kReduceScatter:
      if (!per_rank_counts(call)) {
        g.stage.op = Op::kAllToAll;  // block r of every rank's input comes to rank r
        return g;
      }
      // reduce_scatterv: every rank's whole input; this rank's block of each.
      for (int r = 0; r < rank; ++r) g.offset += call.recv_counts[static_cast<std::size_t>(r)] * es;
      g.count = call.recv_counts[static_cast<std::size_t>(rank)];
      return g;
    case Op::kReduce:
      g.stage.op = Op::kGather;
      g.stage.root = call.root;
      g.sums_here = rank == call.root;
      return g;
    default:
      throw Error(ErrorCode::kInternal,
                  fmt::format("deterministic mode has no ordered form of {}", to_string(call.op)));
  }
}

}  // namespace tpcomm::transport
