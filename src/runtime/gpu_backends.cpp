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

namespace {

bool spans_nodes(const BackendContext& ctx) {
  if (ctx.facts == nullptr) return false;
  for (const auto& r : ctx.facts->ranks) {
    if (r.host != ctx.facts->ranks.front().host) return true;
  }
  return false;
}

// The fields the custom and multimem configurations share, from the context.
template <typename Config>
Config kernel_backend_config(const BackendContext& ctx) {
  Config config;
  config.rank = ctx.rank;
  config.size = ctx.size;
  config.device = ctx.cuda_device;
  config.bootstrap = ctx.bootstrap;
  config.comm_id = ctx.comm_id;
  config.timeout = ctx.timeout;
  config.on_async_failure = ctx.on_async_failure;
  config.cross_node = spans_nodes(ctx);
  return config;
}

}  // namespace

void add_gpu_backend_factories(std::map<Backend, BackendFactory>& f) {
  f[Backend::kCustom] = [](const BackendContext& ctx) {
    auto config = kernel_backend_config<transport::CustomConfig>(ctx);
    config.zero_copy = ctx.zero_copy;
    return transport::make_custom_backend(config);
  };
  f[Backend::kMultimem] = [](const BackendContext& ctx) {
    return transport::make_multimem_backend(kernel_backend_config<transport::MultimemConfig>(ctx));
  };
  f[Backend::kNccl] = [](const BackendContext& ctx) {
    transport::NcclConfig config;
    config.rank = ctx.rank;
    config.size = ctx.size;
    config.device = ctx.cuda_device;
    config.bootstrap = ctx.bootstrap;
    config.timeout = ctx.timeout;
    return transport::make_nccl_backend(config);
  };
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
