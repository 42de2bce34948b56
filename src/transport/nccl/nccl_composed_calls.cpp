// NCCL calls made of other NCCL calls and a kernel (nccl_composed_calls.hpp).
#include "nccl_composed_calls.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>

#include <fmt/format.h>

#include "kernels/cuda/norm_kernel_args.hpp"
#include "kernels/cuda/ordered_kernel_args.hpp"
#include "tpcomm/error.hpp"
#include "transport/common/call_sizes.hpp"
#include "transport/cuda/driver_api.hpp"

namespace tpcomm::transport {

void* DeviceScratch::at_least(std::size_t bytes, const Call& c) {
  bytes = std::max<std::size_t>(bytes, 1);
  if (bytes_ >= bytes) return data_;
  if (c.captured) {
    throw invalid_input(fmt::format(
        "nccl: a captured {} needs {} bytes of scratch ({}) that no eager call of that size made "
        "first (graph capture cannot allocate); run it once before capturing",
        to_string(c.op), bytes, what_));
  }
  release();
  cuda::check_cuda(cudaMalloc(&data_, bytes), what_);
  bytes_ = bytes;
  return data_;
}

void DeviceScratch::release() noexcept {
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
}

namespace {

// A stage of the user's call `c`: the same sequence, stream and capture; `outer` names `c`.
Call stage_of(const Call& c, Op op, const void* in, void* out, std::size_t count) {
  Call s = c;
  s.op = op;
  s.input = in;
  s.output = out;
  s.count = count;
  s.recv_counts = nullptr;
  s.counts_digest = 0;
  s.send_counts = nullptr;
  s.norm = nullptr;
  s.ordered = false;
  s.outer = &c;
  return s;
}

}  // namespace

void run_unfused_rmsnorm(const Call& c, DeviceScratch& sums, const RunStage& run) {
  auto* f32 = static_cast<float*>(sums.at_least(c.count * sizeof(float), c));
  cuda::check_cuda(
      kernels::cuda::launch_to_float(c.input, static_cast<int>(c.type), c.count, f32, c.stream),
      "launching all_reduce_rmsnorm's conversion to fp32");
  Call sum = stage_of(c, Op::kAllReduce, f32, f32, c.count);
  sum.type = DataType::kFloat32;
  sum.reduce = ReduceOp::kSum;
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

void run_rank_ordered(const Call& c, int rank, int size, DeviceScratch& gathered,
                      const RunStage& run) {
  const std::size_t es = size_of(c.type);
  const auto w = static_cast<std::size_t>(size);
  // size x count elements: every rank's all_reduce or reduce input, reduce_scatterv's whole input
  // (count is the blocks' sum), or reduce_scatter's block for this rank from every rank.
  auto* all = static_cast<std::byte*>(gathered.at_least(w * c.count * es, c));
  kernels::cuda::RankOrderArgs a;
  a.blocks = all;
  a.stride_bytes = c.count * es;
  a.world = size;
  a.count = c.count;
  a.type = static_cast<int>(c.type);
  a.reduce = static_cast<int>(c.reduce);
  a.out = c.output;
  switch (c.op) {
    case Op::kAllReduce:
      run(stage_of(c, Op::kAllGather, c.input, all, c.count));
      break;
    case Op::kReduceScatter:
      if (!per_rank_counts(c)) {
        run(stage_of(c, Op::kAllToAll, c.input, all, c.count));  // block r of every rank to r
        break;
      }
      {
        // reduce_scatterv: every rank's whole input; this rank's block of each.
        run(stage_of(c, Op::kAllGather, c.input, all, c.count));
        std::size_t at = 0;
        for (int r = 0; r < rank; ++r) at += c.recv_counts[static_cast<std::size_t>(r)];
        a.blocks = all + at * es;
        a.count = c.recv_counts[static_cast<std::size_t>(rank)];
      }
      break;
    case Op::kReduce: {
      Call gather = stage_of(c, Op::kGather, c.input, all, c.count);
      gather.root = c.root;
      run(gather);
      if (rank != c.root) return;
      break;
    }
    default:
      throw Error(
          ErrorCode::kInternal,
          fmt::format("nccl: deterministic mode has no ordered form of {}", to_string(c.op)));
  }
  cuda::check_cuda(kernels::cuda::launch_rank_order_reduce(a, c.stream),
                   "launching deterministic mode's rank-order reduction");
}

}  // namespace tpcomm::transport
