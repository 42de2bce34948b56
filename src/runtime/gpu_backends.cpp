// The GPU backends' factories: custom, multimem and nccl in a CUDA build, nothing otherwise (a
// kCuda communicator is then refused with the reason).
#include "communicator_impl.hpp"

#ifdef TPCOMM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "transport/custom/custom_backend.hpp"
#include "transport/multimem/multimem_backend.hpp"
#include "transport/nccl/nccl_backend.hpp"
#endif

namespace tpcomm::detail {

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

#else

void add_gpu_backend_factories(std::map<Backend, BackendFactory>&) {}

bool stream_is_capturing(void*) {
  return false;
}

std::string gpu_build_unavailable_reason() {
  return "this tpcomm was built without CUDA (TPCOMM_CUDA=OFF, or nvcc was not found at build "
         "time)";
}

#endif

}  // namespace tpcomm::detail
