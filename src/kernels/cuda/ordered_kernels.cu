// Deterministic mode's rank-order reduction of gathered inputs (ordered_kernel_args.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/kernel_common.cuh"
#include "kernels/cuda/ordered_kernel_args.hpp"

namespace tpcomm::kernels::cuda {
namespace {

__device__ __forceinline__ float finish(float x, int reduce, int world) {
  return reduce == kernel_code::kAvg ? x / static_cast<float>(world) : x;
}

// Whole 16-byte vectors, one per thread per turn: every block's vector widened and combined in
// rank order, as reduce_range does for the custom kernels.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    rank_order_vectors(RankOrderArgs a, std::size_t vectors) {
  using V = Vec<T>;
  const auto* base = static_cast<const char*>(a.blocks);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    float acc[V::kN], x[V::kN];
    V::widen(load_v4(base + v * kVecBytes), acc);
    for (int r = 1; r < a.world; ++r) {
      V::widen(load_v4(base + r * a.stride_bytes + v * kVecBytes), x);
#pragma unroll
      for (int i = 0; i < V::kN; ++i) acc[i] = combine(acc[i], x[i], a.reduce);
    }
#pragma unroll
    for (int i = 0; i < V::kN; ++i) acc[i] = finish(acc[i], a.reduce, a.world);
    *reinterpret_cast<uint4*>(static_cast<char*>(a.out) + v * kVecBytes) = V::narrow(acc);
  }
}

// Elements [from, count) one at a time: the tail after the vectors, or all of them where a block
// or the output does not start on a vector.
template <typename T>
__global__ void __launch_bounds__(kThreads) rank_order_elements(RankOrderArgs a, std::size_t from) {
  constexpr std::size_t es = sizeof(T);
  const auto* base = static_cast<const char*>(a.blocks);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = from + blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += stride) {
    float acc = element_to_f<T>(base + i * es);
    for (int r = 1; r < a.world; ++r) {
      acc = combine(acc, element_to_f<T>(base + r * a.stride_bytes + i * es), a.reduce);
    }
    element_from_f<T>(static_cast<char*>(a.out) + i * es, finish(acc, a.reduce, a.world));
  }
}

int grid_for(std::size_t units) {
  const std::size_t blocks = (units + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks);
}

template <typename T>
int launch(const RankOrderArgs& a, cudaStream_t stream) {
  const bool aligned = reinterpret_cast<std::uintptr_t>(a.blocks) % kVecBytes == 0 &&
                       a.stride_bytes % kVecBytes == 0 &&
                       reinterpret_cast<std::uintptr_t>(a.out) % kVecBytes == 0;
  const std::size_t vectors = aligned ? a.count / Vec<T>::kN : 0;
  if (vectors > 0) rank_order_vectors<T><<<grid_for(vectors), kThreads, 0, stream>>>(a, vectors);
  const std::size_t from = vectors * Vec<T>::kN;
  if (from < a.count) {
    rank_order_elements<T><<<grid_for(a.count - from), kThreads, 0, stream>>>(a, from);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_rank_order_reduce(const RankOrderArgs& a, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (a.count == 0) return static_cast<int>(cudaSuccess);
  if (a.world < 1 || a.reduce < kernel_code::kSum || a.reduce > kernel_code::kAvg) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  switch (a.type) {
    case kernel_code::kFloat32:
      return launch<float>(a, s);
    case kernel_code::kBFloat16:
      return launch<__nv_bfloat16>(a, s);
    case kernel_code::kFloat16:
      return launch<__half>(a, s);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace tpcomm::kernels::cuda
