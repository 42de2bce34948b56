// The ordered form of a reduction (ordered_reduction.hpp).
#include "ordered_reduction.hpp"

#include "kernels/cpu/reduce.hpp"
#include "tpcomm/tuning.hpp"
#include "transport/common/ordered_gather.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm::runtime {
namespace {

// out = the `size` blocks at `first`, `stride` bytes apart, reduced in rank order.
void reduce_blocks(const transport::Call& call, const std::byte* first, std::size_t stride,
                   std::size_t count, int size, void* out) {
  std::vector<const void*> srcs(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) srcs[static_cast<std::size_t>(r)] = first + r * stride;
  kernels::cpu::reduce_slots_with(transport::cpu::chosen_kernel_isa(), srcs.data(), size, count,
                                  call.type, call.reduce, out);
}

}  // namespace

bool takes_ordered_form(const Plan& plan, Backend backend, const transport::Call& call) {
  const bool reduction = reduces(call.op) || call.op == Op::kAllReduceRmsNorm;
  return plan.deterministic && reduction && is_floating(call.type) && !keeps_rank_order(backend);
}

void run_ordered(transport::CollectiveBackend& backend, const transport::Call& call, int rank,
                 int size, std::vector<std::byte>& scratch) {
  const std::size_t bytes = transport::gathered_elements(call, size) * size_of(call.type);
  if (scratch.size() < bytes) scratch.resize(bytes);
  const transport::OrderedGather g = transport::ordered_gather(call, rank, scratch.data());
  backend.run(g.stage);
  if (g.sums_here) {
    reduce_blocks(call, scratch.data() + g.offset, g.stride, g.count, size, call.output);
  }
}

}  // namespace tpcomm::runtime
