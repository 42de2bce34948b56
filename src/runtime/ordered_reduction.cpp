// The ordered form of a reduction (ordered_reduction.hpp).
#include "ordered_reduction.hpp"

#include <fmt/format.h>

#include "kernels/cpu/reduce.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tuning.hpp"
#include "transport/common/call_sizes.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm::runtime {
namespace {

// A stage of `call` through the backend: `op` from `input` into `output`, `count` as that op
// takes it.
transport::Call stage_of(const transport::Call& call, Op op, const void* input, void* output,
                         std::size_t count) {
  transport::Call stage = call;
  stage.op = op;
  stage.input = input;
  stage.output = output;
  stage.count = count;
  stage.reduce = ReduceOp::kSum;
  stage.send_counts = nullptr;
  stage.recv_counts = nullptr;
  stage.counts_digest = 0;
  stage.norm = nullptr;
  // The user's call: this one, or the one it is a stage of (all_reduce_rmsnorm's fp32 sum).
  stage.outer = call.outer != nullptr ? call.outer : &call;
  return stage;
}

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
  const std::size_t es = size_of(call.type);
  const auto w = static_cast<std::size_t>(size);
  const bool per_rank = transport::per_rank_counts(call);
  // size x count elements: every rank's all_reduce or reduce input, reduce_scatterv's whole input
  // (count is the blocks' sum), or reduce_scatter's block for this rank from every rank.
  if (scratch.size() < w * call.count * es) scratch.resize(w * call.count * es);
  std::byte* all = scratch.data();
  switch (call.op) {
    case Op::kAllReduce:
      backend.run(stage_of(call, Op::kAllGather, call.input, all, call.count));
      return reduce_blocks(call, all, call.count * es, call.count, size, call.output);
    case Op::kReduceScatter: {
      if (!per_rank) {
        // Block r of every rank's input comes to rank r, in rank order.
        backend.run(stage_of(call, Op::kAllToAll, call.input, all, call.count));
        return reduce_blocks(call, all, call.count * es, call.count, size, call.output);
      }
      // reduce_scatterv: every rank's whole input; this rank's block of each.
      backend.run(stage_of(call, Op::kAllGather, call.input, all, call.count));
      std::size_t at = 0;
      for (int r = 0; r < rank; ++r) at += call.recv_counts[static_cast<std::size_t>(r)];
      return reduce_blocks(call, all + at * es, call.count * es,
                           call.recv_counts[static_cast<std::size_t>(rank)], size, call.output);
    }
    case Op::kReduce: {
      transport::Call gather = stage_of(call, Op::kGather, call.input, all, call.count);
      gather.root = call.root;
      backend.run(gather);
      if (rank == call.root)
        reduce_blocks(call, all, call.count * es, call.count, size, call.output);
      return;
    }
    default:
      throw Error(ErrorCode::kInternal,
                  fmt::format("deterministic mode has no ordered form of {}", to_string(call.op)));
  }
}

}  // namespace tpcomm::runtime
