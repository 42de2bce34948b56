// The GPU check's one way to fail on a CUDA runtime error (gpu_check.cpp, communicator_check.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::gpu_check {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw Error(ErrorCode::kInternal, fmt::format("{}: {}", what, cudaGetErrorString(e)));
  }
}

}  // namespace tpcomm::gpu_check
