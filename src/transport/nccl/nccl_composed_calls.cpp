// NCCL calls made of other NCCL calls and a kernel (nccl_composed_calls.hpp).
#include "nccl_composed_calls.hpp"

#include <algorithm>

#include "kernels/cuda/norm_kernel_args.hpp"
#include "kernels/cuda/ordered_kernel_args.hpp"
#include "transport/common/call_stage.hpp"
#include "transport/common/ordered_gather.hpp"
#include "transport/cuda/driver_api.hpp"

namespace tpcomm::transport {

void run_unfused_rmsnorm(const Call& c, GraphSafeScratch& sums, const RunStage& run) {
  auto* f32 = static_cast<float*>(sums.get(std::max<std::size_t>(c.count, 1) * sizeof(float),
                                           c.captured, "nccl's unfused all_reduce_rmsnorm"));
  cuda::check_cuda(
      kernels::cuda::launch_to_float(c.input, static_cast<int>(c.type), c.count, f32, c.stream),
      "launching all_reduce_rmsnorm's conversion to fp32");
  Call sum = stage_of(c, Op::kAllReduce, f32, f32, c.count);
  sum.type = DataType::kFloat32;
  sum.ordered = c.ordered;
  run(sum);
  const RmsNorm& norm = *c.norm;
  kernels::cuda::NormArgs n;
  n.sums = f32;
  n.sums_f32 = true;
  n.type = static_cast<int>(c.type);
  n.rows = c.count / norm.hidden;
  n.hidden = norm.hidden;
  n.residual = norm.residual;
  n.residual_out = norm.residual_out;
  n.weight = norm.weight;
  n.out = c.output;
  n.eps = norm.eps;
  cuda::check_cuda(kernels::cuda::launch_add_rmsnorm(n, c.stream),
                   "launching all_reduce_rmsnorm's add+norm kernel");
}

void run_rank_ordered(const Call& c, int rank, int size, GraphSafeScratch& gathered,
                      const RunStage& run) {
  const std::size_t bytes = std::max<std::size_t>(gathered_elements(c, size) * size_of(c.type), 1);
  auto* all = static_cast<std::byte*>(
      gathered.get(bytes, c.captured, "deterministic mode's gathered inputs on nccl"));
  const OrderedGather g = ordered_gather(c, rank, all);
  run(g.stage);
  if (!g.sums_here) return;
  kernels::cuda::RankOrderArgs a;
  a.blocks = all + g.offset;
  a.stride_bytes = g.stride;
  a.world = size;
  a.count = g.count;
  a.type = static_cast<int>(c.type);
  a.reduce = static_cast<int>(c.reduce);
  a.out = c.output;
  cuda::check_cuda(kernels::cuda::launch_rank_order_reduce(a, c.stream),
                   "launching deterministic mode's rank-order reduction");
}

}  // namespace tpcomm::transport
