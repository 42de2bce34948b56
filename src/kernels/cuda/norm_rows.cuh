// all_reduce_rmsnorm's epilogue on the GPU, one row per thread block: the sources' elements
// summed in fp32 in rank order, plus the residual, rounded once to T (the new residual stream, in
// `keep`); then that rounded row times 1 / sqrt(mean of its squares + eps) times the weight, in
// fp32 and rounded once (`out`). As the CPU kernel (kernels/cpu/add_rmsnorm.hpp).
//
// Every rank computes the same bits: thread t owns the units u = t, t + blockDim.x, ... of kN
// elements (16 bytes of T) whatever the pointers' alignment (which decides only whether a unit is
// read as one vector or element by element), adds the squares of its elements in order, and the
// block adds the threads' sums in one fixed order. The scale is 1 / sqrtf (correctly rounded on
// every architecture), not rsqrtf.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernel_common.cuh"

namespace tpcomm::kernels::cuda {

// The row's places: the sources (world of them, S elements: T, or float for the unfused path's
// all-reduced sums), the residual (or null), where the rounded sum goes and where the norm goes
// (keep may be out itself), the weight.
template <int MaxW>
struct NormRow {
  Sources<MaxW> src;
  const char* residual;
  char* keep;
  char* out;
  const char* weight;
};

// The sum of every thread's `mine`, the same on every thread, added in one order: a butterfly
// within each warp, then the warps' sums in warp order by thread 0. `shared` holds a float per
// warp and one for the result.
__device__ inline float block_sum(float mine, float* shared) {
#pragma unroll
  for (int d = 16; d > 0; d /= 2) mine += __shfl_xor_sync(0xffffffffu, mine, d);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x + 31) / 32;
  if (threadIdx.x % 32 == 0) shared[warp] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += shared[w];
    shared[warps] = total;
  }
  __syncthreads();
  const float total = shared[warps];
  __syncthreads();  // `shared` may be reused by the next row
  return total;
}

__device__ __forceinline__ bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kVecBytes == 0;
}

// One row of `hidden` elements by the whole block.
template <typename T, typename S, int MaxW>
__device__ void add_rmsnorm_row(int world, const NormRow<MaxW>& r, std::size_t hidden, float eps,
                                float* shared) {
  constexpr std::size_t kN = kVecBytes / sizeof(T);
  constexpr std::size_t ts = sizeof(T), ss = sizeof(S);
  // Whole vectors only when the sources are T (a float source holds half as many per vector) and
  // every pointer of the row is aligned; either way the same elements per thread, in one order.
  bool vectors = sizeof(S) == sizeof(T) && hidden % kN == 0 && aligned16(r.keep) &&
                 (r.residual == nullptr || aligned16(r.residual));
  for (int q = 0; q < MaxW && q < world; ++q) vectors = vectors && aligned16(r.src.at[q]);
  const std::size_t units = (hidden + kN - 1) / kN;
  float squares = 0.0f;
  for (std::size_t u = threadIdx.x; u < units; u += blockDim.x) {
    const std::size_t first = u * kN;
    const std::size_t n = hidden - first < kN ? hidden - first : kN;
    float acc[kN], x[kN];
    if (vectors) {
      Vec<T>::widen(load_v4(r.src.at[0] + first * ts), acc);
      for (int q = 1; q < MaxW && q < world; ++q) {
        Vec<T>::widen(load_v4(r.src.at[q] + first * ts), x);
#pragma unroll
        for (std::size_t i = 0; i < kN; ++i) acc[i] += x[i];
      }
      if (r.residual != nullptr) {
        Vec<T>::widen(*reinterpret_cast<const uint4*>(r.residual + first * ts), x);
#pragma unroll
        for (std::size_t i = 0; i < kN; ++i) acc[i] += x[i];
      }
      const uint4 rounded = Vec<T>::narrow(acc);
      *reinterpret_cast<uint4*>(r.keep + first * ts) = rounded;
      Vec<T>::widen(rounded, acc);
#pragma unroll
      for (std::size_t i = 0; i < kN; ++i) squares += acc[i] * acc[i];
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t e = first + i;
      float sum = element_to_f<S>(r.src.at[0] + e * ss);
      for (int q = 1; q < MaxW && q < world; ++q) sum += element_to_f<S>(r.src.at[q] + e * ss);
      if (r.residual != nullptr) sum += element_to_f<T>(r.residual + e * ts);
      element_from_f<T>(r.keep + e * ts, sum);
      const float v = element_to_f<T>(r.keep + e * ts);
      squares += v * v;
    }
  }
  const float total = block_sum(squares, shared);
  const float inv = 1.0f / sqrtf(total / static_cast<float>(hidden) + eps);
  // The same units as above: each thread reads back only what it wrote.
  const bool vector_out = vectors && aligned16(r.out) && aligned16(r.weight);
  for (std::size_t u = threadIdx.x; u < units; u += blockDim.x) {
    const std::size_t first = u * kN;
    const std::size_t n = hidden - first < kN ? hidden - first : kN;
    if (vector_out) {
      float k[kN], w[kN];
      Vec<T>::widen(*reinterpret_cast<const uint4*>(r.keep + first * ts), k);
      Vec<T>::widen(*reinterpret_cast<const uint4*>(r.weight + first * ts), w);
#pragma unroll
      for (std::size_t i = 0; i < kN; ++i) k[i] = k[i] * inv * w[i];
      *reinterpret_cast<uint4*>(r.out + first * ts) = Vec<T>::narrow(k);
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t e = first + i;
      const float y = element_to_f<T>(r.keep + e * ts) * inv * element_to_f<T>(r.weight + e * ts);
      element_from_f<T>(r.out + e * ts, y);
    }
  }
}

}  // namespace tpcomm::kernels::cuda
