// The custom collective kernels: one-shot and two-shot all-reduce, all-gather and reduce-scatter
// over peer-mapped workspaces. 16-byte vector loads, fp32 accumulation in rank order (so every
// rank computes bitwise the same result), signal pads with growing step numbers, waits bounded
// by an abort word, the group's failure word and a time budget, and a failure that every later
// launch on every rank turns into an error (kernel_codes.hpp, "the group's failure word").
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "custom_kernel_args.hpp"
#include "kernels/cuda/kernel_common.cuh"
#include "kernels/cuda/kernel_list.hpp"
#include "kernels/cuda/norm_rows.cuh"

namespace tpcomm::kernels::cuda {
namespace {

__device__ __forceinline__ std::uint64_t* pads(void* workspace) {
  return static_cast<std::uint64_t*>(workspace);
}
__device__ __forceinline__ char* data(const KernelArgs& a, int r, std::uint64_t step) {
  return static_cast<char*>(a.peers[r]) + a.data_offset + (step % 2) * a.half_bytes;
}
// Rank r's copy of the group's failure word (kernel_codes.hpp).
__device__ __forceinline__ std::uint64_t* failed_word(const KernelArgs& a, int r) {
  return reinterpret_cast<std::uint64_t*>(static_cast<char*>(a.peers[r]) +
                                          workspace_layout(0, 0).failed_offset);
}

// A wait of this rank ran out of time: every rank's failure word says so (unless the group
// failed already: the first cause stays), so that the peers' kernels stop waiting for this one
// and every later launch on every rank fails. (A rank that aborts tells the group from the host,
// CustomBackend::abort; closing a communicator ends its own kernels only.)
__device__ void tell_the_group(const KernelArgs& a) {
  if (load_acquire(failed_word(a, a.rank)) != 0) return;
  const std::uint64_t value = group_failure_value(1, a.rank);
  for (int q = 0; q < a.world; ++q) store_release(failed_word(a, q), value);
}

// Every thread t < world signals rank t and waits for rank t's signal. Returns false on every
// thread of the block when a wait gave up: the failure is recorded for the host, the group is
// told of a timeout, and a graph replay traps (end_failed_launch).
template <int MaxW>
__device__ bool barrier(const KernelArgs& a, int phase, std::uint64_t step) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  // The block's writes are ordered before the signal by the barrier and then one system fence
  // per signalling thread (fences are cumulative), not by a fence in each of the 512 threads.
  __syncthreads();
  const int p = static_cast<int>(threadIdx.x);
  if (p < a.world && p < MaxW) {
    __threadfence_system();
    store_release(pads(a.peers[p]) + pad_index(phase, blockIdx.x, a.rank), step);
    const std::uint64_t* mine = pads(a.peers[a.rank]) + pad_index(phase, blockIdx.x, p);
    const int code = bounded_wait(mine, step, a.abort_word, failed_word(a, a.rank),
                                  a.wait_budget_ns, a.failure, WaitSite{a.rank, p, phase, step});
    if (code != 0) {
      if (code == 1) tell_the_group(a);
      failed = 1;
    }
  }
  __syncthreads();
  if (failed != 0) end_failed_launch(a.in_graph);
  return failed == 0;
}

// Every rank's source of this step: its data buffer at `offset` (the copy protocol), or its own
// input in place (a registered graph buffer slot).
template <int MaxW>
__device__ Sources<MaxW> data_sources(const KernelArgs& a, std::uint64_t step, std::size_t offset) {
  Sources<MaxW> s;
  for (int r = 0; r < MaxW; ++r) s.at[r] = r < a.world ? data(a, r, step) + offset : nullptr;
  return s;
}
template <int MaxW>
__device__ Sources<MaxW> registered_sources(const KernelArgs& a) {
  Sources<MaxW> s;
  for (int r = 0; r < MaxW; ++r) {
    s.at[r] =
        r < a.world ? reinterpret_cast<const char*>(a.graph_slot[1 + r]) + a.slot_offset : nullptr;
  }
  return s;
}

// all_reduce_rmsnorm by rows: block b takes rows [R b / nb, R (b + 1) / nb) of the chunk, copies
// them into this rank's buffer and meets its peers' block b. One-shot: then normalises each of
// those rows from every rank's copy into the outputs. Two-shot: normalises its own share of them
// into its buffer (the new residual rows into the buffer's second half), meets again, and copies
// every rank's share out. Peers read only their own share's rows of this buffer.
template <typename T, int MaxW>
__device__ void rmsnorm_rows(const KernelArgs& a, std::uint64_t step, bool two_shot) {
  __shared__ float partials[kThreads / 32 + 1];
  const std::size_t row_bytes = a.hidden * sizeof(T);
  const std::size_t rows = a.count / a.hidden;
  const std::size_t nb = gridDim.x;
  const std::size_t lo = rows * blockIdx.x / nb, hi = rows * (blockIdx.x + 1) / nb;
  char* mine = data(a, a.rank, step);
  auto* out = static_cast<char*>(a.output);
  auto* residual_out = static_cast<char*>(a.residual_out);
  copy_bytes(mine + lo * row_bytes, static_cast<const char*>(a.input) + lo * row_bytes,
             (hi - lo) * row_bytes);
  if (!barrier<MaxW>(a, 0, step)) return;
  auto normalise = [&](std::size_t row, char* keep, char* to) {
    NormRow<MaxW> r;
    r.src = data_sources<MaxW>(a, step, row * row_bytes);
    r.residual = a.residual ? static_cast<const char*>(a.residual) + row * row_bytes : nullptr;
    r.keep = keep;
    r.out = to;
    r.weight = static_cast<const char*>(a.weight);
    add_rmsnorm_row<T, T, MaxW>(a.world, r, a.hidden, a.eps, partials);
  };
  if (!two_shot) {
    for (std::size_t row = lo; row < hi; ++row) {
      char* to = out + row * row_bytes;
      normalise(row, residual_out ? residual_out + row * row_bytes : to, to);
    }
    return;
  }
  const std::size_t n = hi - lo, w = static_cast<std::size_t>(a.world);
  const std::size_t half = a.half_bytes / 2;  // where a buffer's new residual rows start
  const auto share = [&](std::size_t q) { return lo + n * q / w; };
  const auto me = static_cast<std::size_t>(a.rank);
  for (std::size_t row = share(me); row < share(me + 1); ++row) {
    normalise(row, mine + half + row * row_bytes, mine + row * row_bytes);
  }
  if (!barrier<MaxW>(a, 1, step)) return;
  for (std::size_t q = 0; q < w; ++q) {
    const char* theirs = data(a, static_cast<int>(q), step);
    const std::size_t at = share(q) * row_bytes, bytes = (share(q + 1) - share(q)) * row_bytes;
    copy_bytes(out + at, theirs + at, bytes);
    if (residual_out) copy_bytes(residual_out + at, theirs + half + at, bytes);
  }
}

// Reduce-scatter: every rank's blocks of this block's range copied in, then block `rank` of
// every rank's copy reduced into the output.
template <typename T, int MaxW>
__device__ void reduce_scatter_range(const KernelArgs& a, std::uint64_t step) {
  constexpr std::size_t es = sizeof(T);
  constexpr std::size_t unit = kVecBytes / es;
  const Range r =
      split_vectors(a.count, static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x), unit);
  char* mine = data(a, a.rank, step);
  // Each rank's block starts on a vector: the count rounded up to whole vectors (chunks are
  // whole vectors, so a padded last chunk still fits).
  const std::size_t stride = (a.count + unit - 1) / unit * unit;
  for (int q = 0; q < a.world; ++q) {
    copy_bytes(mine + (q * stride + r.begin) * es,
               static_cast<const char*>(a.input) + q * a.in_rank_stride + r.begin * es,
               r.size() * es);
  }
  if (!barrier<MaxW>(a, 0, step)) return;
  reduce_range<T, MaxW>(a.world, a.reduce, data_sources<MaxW>(a, step, a.rank * stride * es),
                        r.begin, r.end, static_cast<char*>(a.output));
}

// Work is split in whole 16-byte vectors, so each block's slices start aligned wherever the
// buffers are aligned, and copies and reductions run on vectors but for the last tail.
template <typename T, int MaxW>
__global__ void __launch_bounds__(kThreads) custom_kernel(KernelArgs a) {
  constexpr std::size_t es = sizeof(T);
  constexpr std::size_t unit = kVecBytes / es;
  const LaunchStep launch_step(reinterpret_cast<unsigned long long*>(
      static_cast<char*>(a.peers[a.rank]) + workspace_layout(0, 0).steps_offset));
  const std::uint64_t step = launch_step.number();
  if (group_failed_on_entry(failed_word(a, a.rank), a.failure, a.rank, step))
    return end_failed_launch(a.in_graph);
  const int b = static_cast<int>(blockIdx.x), nb = static_cast<int>(gridDim.x);
  char* mine = data(a, a.rank, step);
  // A registered graph buffer: inputs read in place (register_graph_buffers voted the flag); an
  // unregistered one runs the operation the eager table chose for copied inputs.
  const bool in_place = a.graph_slot != nullptr && a.graph_slot[0] != 0;
  const KernelOp op = a.graph_slot != nullptr && !in_place ? a.unregistered_op : a.op;
  switch (op) {
    case KernelOp::kOneShot: {
      const Range r = split_vectors(a.count, nb, b, unit);
      if (!in_place) {
        copy_bytes(mine + r.begin * es, static_cast<const char*>(a.input) + r.begin * es,
                   r.size() * es);
      }
      if (!barrier<MaxW>(a, 0, step)) return;
      reduce_range<T, MaxW>(a.world, a.reduce,
                            in_place ? registered_sources<MaxW>(a) : data_sources<MaxW>(a, step, 0),
                            r.begin, r.end, static_cast<char*>(a.output));
      // Inputs read in place must stay as they are until every peer has read them.
      if (in_place) barrier<MaxW>(a, 2, step);  // (a failure there is recorded and told)
      return;
    }
    case KernelOp::kTwoShot: {
      const Range r = split_vectors(a.count, nb, b, unit);
      if (!in_place) {
        copy_bytes(mine + r.begin * es, static_cast<const char*>(a.input) + r.begin * es,
                   r.size() * es);
      }
      if (!barrier<MaxW>(a, 0, step)) return;
      // My slice of this block's range, reduced from every rank into my own buffer (peers read
      // other slices of it, never this one, so the write cannot race their reads). The middle
      // barrier then proves every peer is done with the inputs.
      const Range s = split_vectors(r.size(), a.world, a.rank, unit);
      reduce_range<T, MaxW>(a.world, a.reduce,
                            in_place ? registered_sources<MaxW>(a) : data_sources<MaxW>(a, step, 0),
                            r.begin + s.begin, r.begin + s.end, mine);
      if (!barrier<MaxW>(a, 1, step)) return;
      for (int q = 0; q < a.world; ++q) {
        const Range sq = split_vectors(r.size(), a.world, q, unit);
        const std::size_t at = (r.begin + sq.begin) * es;
        copy_bytes(static_cast<char*>(a.output) + at, data(a, q, step) + at, sq.size() * es);
      }
      return;
    }
    case KernelOp::kAllGather: {
      const Range r = split_vectors(a.count, nb, b, unit);
      copy_bytes(mine + r.begin * es, static_cast<const char*>(a.input) + r.begin * es,
                 r.size() * es);
      if (!barrier<MaxW>(a, 0, step)) return;
      for (int q = 0; q < a.world; ++q) {
        copy_bytes(static_cast<char*>(a.output) + q * a.out_rank_stride + r.begin * es,
                   data(a, q, step) + r.begin * es, r.size() * es);
      }
      return;
    }
    case KernelOp::kOneShotRmsNorm:  // custom_rmsnorm_kernel
    case KernelOp::kTwoShotRmsNorm:
      return;
    case KernelOp::kReduceScatter:
      return reduce_scatter_range<T, MaxW>(a, step);
  }
}

// all_reduce_rmsnorm, a kernel of its own: inside custom_kernel its rows' registers made the
// W = 2 and 4 all-reduces spill (ptxas, sm_90: bf16 W = 2 0 -> 152 bytes, float W = 4 40 -> 196).
template <typename T, int MaxW>
__global__ void __launch_bounds__(kThreads) custom_rmsnorm_kernel(KernelArgs a) {
  const LaunchStep launch_step(reinterpret_cast<unsigned long long*>(
      static_cast<char*>(a.peers[a.rank]) + workspace_layout(0, 0).steps_offset));
  const std::uint64_t step = launch_step.number();
  if (group_failed_on_entry(failed_word(a, a.rank), a.failure, a.rank, step))
    return end_failed_launch(a.in_graph);
  rmsnorm_rows<T, MaxW>(a, step, a.op == KernelOp::kTwoShotRmsNorm);
}

template <typename T, int MaxW>
int launch(const KernelArgs& a, cudaStream_t stream) {
  if (a.op == KernelOp::kOneShotRmsNorm || a.op == KernelOp::kTwoShotRmsNorm) {
    custom_rmsnorm_kernel<T, MaxW><<<a.blocks, kThreads, 0, stream>>>(a);
  } else {
    custom_kernel<T, MaxW><<<a.blocks, kThreads, 0, stream>>>(a);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_custom_kernel(const KernelArgs& a, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  TPCOMM_DISPATCH_BY_TYPE_AND_WORLD(a, s);
}

}  // namespace tpcomm::kernels::cuda
