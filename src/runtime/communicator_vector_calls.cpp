// The public Communicator's calls with per-rank counts (all_gatherv, reduce_scatterv): the
// counts checked against the group and digested, then the gate and dispatch like any call.
#include <fmt/format.h>

#include "communicator_state.hpp"
#include "dispatch.hpp"
#include "transport/common/call_sizes.hpp"

namespace tpcomm {
namespace {

void run_vector(runtime::CommunicatorState& c, Op op, const void* input, void* output,
                const std::vector<std::size_t>& counts, DataType type, ReduceOp reduce,
                CudaStream stream, bool device_call) {
  const char* name = op == Op::kAllGather ? "all_gatherv" : "reduce_scatterv";
  if (counts.size() != static_cast<std::size_t>(c.group_size)) {
    throw invalid_input(fmt::format("rank {}: {}({}): {} counts for a group of {} (one per rank)",
                                    c.group_rank, name, to_string(type), counts.size(),
                                    c.group_size));
  }
  std::size_t total = 0;
  for (std::size_t n : counts) {
    if (__builtin_add_overflow(total, n, &total)) {
      throw invalid_input(
          fmt::format("rank {}: {}({}): the counts add up to more than size_t "
                      "holds",
                      c.group_rank, name, to_string(type)));
    }
  }
  transport::Call call{.op = op,
                       .input = input,
                       .output = output,
                       .count = total,
                       .type = type,
                       .reduce = reduce,
                       .recv_counts = counts.data(),
                       .counts_digest = transport::counts_digest(counts.data(), counts.size()),
                       .stream = stream};
  c.gate.run(name, [&] { runtime::run_call(c, call, device_call); });
}

}  // namespace

void Communicator::all_gatherv(const void* input, void* output,
                               const std::vector<std::size_t>& counts, DataType type) {
  run_vector(*impl_, Op::kAllGather, input, output, counts, type, ReduceOp::kSum, nullptr, false);
}

void Communicator::reduce_scatterv(const void* input, void* output,
                                   const std::vector<std::size_t>& counts, DataType type,
                                   ReduceOp op) {
  run_vector(*impl_, Op::kReduceScatter, input, output, counts, type, op, nullptr, false);
}

void Communicator::all_gatherv(const void* input, void* output,
                               const std::vector<std::size_t>& counts, DataType type,
                               CudaStream stream) {
  run_vector(*impl_, Op::kAllGather, input, output, counts, type, ReduceOp::kSum, stream, true);
}

void Communicator::reduce_scatterv(const void* input, void* output,
                                   const std::vector<std::size_t>& counts, DataType type,
                                   ReduceOp op, CudaStream stream) {
  run_vector(*impl_, Op::kReduceScatter, input, output, counts, type, op, stream, true);
}

}  // namespace tpcomm
