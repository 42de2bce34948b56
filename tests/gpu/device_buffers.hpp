// The GPU check's input and output buffers on the current device with a stream of their own
// (communicator_check.cpp, deterministic_check.cpp): filled and read back synchronously.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda_check.hpp"

namespace tpcomm::gpu_check {

struct DeviceBuffers {
  void* in = nullptr;
  void* out = nullptr;
  cudaStream_t stream = nullptr;
  std::size_t out_bytes = 0;

  explicit DeviceBuffers(std::size_t in_bytes) : DeviceBuffers(in_bytes, in_bytes) {}
  DeviceBuffers(std::size_t in_bytes, std::size_t out_size) : out_bytes(out_size) {
    check_cuda(cudaMalloc(&in, in_bytes), "cudaMalloc");
    check_cuda(cudaMalloc(&out, out_bytes), "cudaMalloc");
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~DeviceBuffers() {
    cudaStreamDestroy(stream);
    cudaFree(in);
    cudaFree(out);
  }
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  std::vector<std::uint8_t> read(const void* p, std::size_t bytes) const {
    std::vector<std::uint8_t> got(bytes);
    check_cuda(cudaMemcpyAsync(got.data(), p, bytes, cudaMemcpyDefault, stream), "copy out");
    check_cuda(cudaStreamSynchronize(stream), "copy out");
    return got;
  }
  // `bytes` into `p`, and as many bytes of `out` (at most all of it) set to 0xff, so that an
  // output nothing wrote is seen.
  void write(void* p, const std::vector<std::uint8_t>& bytes) const {
    check_cuda(cudaMemcpyAsync(p, bytes.data(), bytes.size(), cudaMemcpyDefault, stream),
               "copy in");
    check_cuda(cudaMemsetAsync(out, 0xff, std::min(bytes.size(), out_bytes), stream), "memset");
    check_cuda(cudaStreamSynchronize(stream), "copy in");
  }
};

}  // namespace tpcomm::gpu_check
