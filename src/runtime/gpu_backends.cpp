// The GPU backends' factories: custom, multimem and nccl in a CUDA build, nothing otherwise (a
// kCuda communicator is then refused with the reason).
#include <fmt/format.h>

#include "communicator_state.hpp"

#ifdef TPCOMM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "transport/cuda/device_memory.hpp"
#include "transport/custom/custom_backend.hpp"
#include "transport/multimem/multimem_backend.hpp"
#include "transport/nccl/nccl_backend.hpp"
#endif

namespace tpcomm::runtime {

#ifdef TPCOMM_HAVE_CUDA

void add_gpu_backend_factories(std::map<Backend, BackendFactory>& f) {
  f[Backend::kCustom] = transport::make_custom_backend;
  f[Backend::kMultimem] = transport::make_multimem_backend;
  f[Backend::kNccl] = transport::make_nccl_backend;
}

std::string gpu_build_unavailable_reason() {
  return transport::cuda_unavailable_reason();
}

bool stream_is_capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    cudaGetLastError();  // not a capture; the call itself will report a bad stream
    return false;
  }
  return status == cudaStreamCaptureStatusActive;
}

std::shared_ptr<void> device_alloc(std::size_t bytes, int device) {
  return transport::cuda::device_alloc(bytes, device);
}

void device_copy_async(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                      static_cast<cudaStream_t>(stream));
      e != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorCode::kInvalidInput,
                fmt::format("cudaMemcpyAsync of {} bytes: {}", bytes, cudaGetErrorString(e)));
  }
}

#else

void add_gpu_backend_factories(std::map<Backend, BackendFactory>&) {}

bool stream_is_capturing(void*) {
  return false;
}

std::shared_ptr<void> device_alloc(std::size_t, int) {
  throw Error(ErrorCode::kUnavailable, gpu_build_unavailable_reason());
}

void device_copy_async(void*, const void*, std::size_t, void*) {
  throw Error(ErrorCode::kUnavailable, gpu_build_unavailable_reason());
}

std::string gpu_build_unavailable_reason() {
  return "this tpcomm was built without CUDA (TPCOMM_CUDA=OFF, or nvcc was not found at build "
         "time)";
}

#endif

}  // namespace tpcomm::runtime
