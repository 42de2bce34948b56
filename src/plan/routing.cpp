// Routing (plan.hpp): which backend and algorithm carry one call, decided here only.
#include "tpcomm/plan.hpp"

namespace tpcomm {

std::uint64_t routed_bytes(Op op, std::uint64_t input_bytes, int world_size) {
  const bool gathered = op == Op::kAllGather || op == Op::kGather;
  return gathered ? input_bytes * static_cast<std::uint64_t>(world_size) : input_bytes;
}

TableRow route_call(const Plan& plan, Op op, std::uint64_t bytes, DataType type) {
  TableRow row = plan.ops.at(op).row_for(bytes);
  if (const auto other = backend_for_type(row.backend, type)) {
    row.backend = *other;
    row.algorithm = algorithms_of(*other, op).front();
    row.blocks.reset();
    row.step_bytes.reset();
  }
  return row;
}

}  // namespace tpcomm
