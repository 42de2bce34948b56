// all_reduce_rmsnorm's kernels outside the custom kernel (norm_kernel_args.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/kernel_common.cuh"
#include "kernels/cuda/norm_kernel_args.hpp"
#include "kernels/cuda/norm_rows.cuh"

namespace tpcomm::kernels::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kThreads)
    to_float_kernel(const T* in, std::size_t n, float* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = to_float(in[i]);
  }
}

// Rows b, b + gridDim.x, ...: one source (the sums) per row.
template <typename T, typename S>
__global__ void __launch_bounds__(kThreads) add_rmsnorm_kernel(NormArgs a) {
  __shared__ float partials[kThreads / 32 + 1];
  const std::size_t bytes = a.hidden * sizeof(T);
  for (std::size_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    NormRow<1> r;
    r.src.at[0] = static_cast<const char*>(a.sums) + row * a.hidden * sizeof(S);
    r.residual = a.residual ? static_cast<const char*>(a.residual) + row * bytes : nullptr;
    r.out = static_cast<char*>(a.out) + row * bytes;
    r.keep = a.residual_out ? static_cast<char*>(a.residual_out) + row * bytes : r.out;
    r.weight = static_cast<const char*>(a.weight);
    add_rmsnorm_row<T, S, 1>(1, r, a.hidden, a.eps, partials);
  }
}

int grid_for(std::size_t units) {
  const std::size_t blocks = (units + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks);
}

template <typename T>
int launch_norm(const NormArgs& a, cudaStream_t stream) {
  const int grid = static_cast<int>(a.rows < 1 ? 1 : a.rows > 4096 ? 4096 : a.rows);
  if (a.sums_f32) {
    add_rmsnorm_kernel<T, float><<<grid, kThreads, 0, stream>>>(a);
  } else {
    add_rmsnorm_kernel<T, T><<<grid, kThreads, 0, stream>>>(a);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_to_float(const void* in, int type, std::size_t n, float* out, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (n == 0) return static_cast<int>(cudaSuccess);
  if (type == kernel_code::kFloat32) {
    return static_cast<int>(
        cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
  }
  if (type == kernel_code::kBFloat16) {
    to_float_kernel<<<grid_for(n), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(in), n, out);
  } else if (type == kernel_code::kFloat16) {
    to_float_kernel<<<grid_for(n), kThreads, 0, s>>>(static_cast<const __half*>(in), n, out);
  } else {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

int launch_add_rmsnorm(const NormArgs& a, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (a.rows == 0) return static_cast<int>(cudaSuccess);
  switch (a.type) {
    case kernel_code::kFloat32:
      return launch_norm<float>(a, s);
    case kernel_code::kBFloat16:
      return launch_norm<__nv_bfloat16>(a, s);
    case kernel_code::kFloat16:
      return launch_norm<__half>(a, s);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace tpcomm::kernels::cuda
