// Two of the one-GPU experiments (docs/gpu-check.md, "The GPU check") for tpcomm_gpu_latency: E7,
// the local cost of the barrier's fences, and E11, whether tpcomm's capture query on the legacy
// default stream breaks another thread's CUDA graph capture.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "kernels/cuda/kernel_common.cuh"
#include "latency_harness.cuh"

namespace tpcomm::runtime {
bool stream_is_capturing(void* stream);  // src/runtime/gpu_backends.cpp, what every call asks
}  // namespace tpcomm::runtime

namespace tpcomm::latency {
namespace {

namespace cuda = kernels::cuda;
constexpr int kBlocks = 36;
constexpr int kRounds = 10000;

__device__ __forceinline__ std::uint64_t load_relaxed(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// kRounds barrier rounds of one block against its own pad, shaped as the custom kernel's
// barrier (custom_kernels.cu): __syncthreads, one thread signals and waits, __syncthreads.
// Fence: membar.sys (__threadfence_system) before the st.release.sys. Acquire: the wait spins on
// ld.acquire.sys; otherwise on ld.relaxed.sys with one fence.acq_rel.sys after it.
template <bool Fence, bool Acquire>
__global__ void __launch_bounds__(cuda::kThreads) rounds_kernel(std::uint64_t* pads) {
  std::uint64_t* mine = pads + blockIdx.x * 32;  // a 256-byte line of its own per block
  for (std::uint64_t i = 1; i <= kRounds; ++i) {
    __syncthreads();
    if (threadIdx.x == 0) {
      if (Fence) __threadfence_system();
      cuda::store_release(mine, i);
      if (Acquire) {
        while (cuda::load_acquire(mine) < i) {
        }
      } else {
        while (load_relaxed(mine) < i) {
        }
        asm volatile("fence.acq_rel.sys;" ::: "memory");
      }
    }
    __syncthreads();
  }
}

template <bool Fence, bool Acquire>
double ns_per_round(std::uint64_t* pads, cudaStream_t s) {
  check(cudaMemsetAsync(pads, 0, kBlocks * 256, s), "reset pads");
  rounds_kernel<Fence, Acquire><<<kBlocks, cuda::kThreads, 0, s>>>(pads);  // warm-up
  check(cudaMemsetAsync(pads, 0, kBlocks * 256, s), "reset pads");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(cudaEventRecord(a, s), "event");
  rounds_kernel<Fence, Acquire><<<kBlocks, cuda::kThreads, 0, s>>>(pads);
  check(cudaGetLastError(), "launch");
  check(cudaEventRecord(b, s), "event");
  check(cudaEventSynchronize(b), "rounds");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms * 1e6 / kRounds;
}

__global__ void tiny_kernel(int* p) {
  if (p != nullptr) *p = 1;
}

}  // namespace

int barrier_cost() {
  std::uint64_t* pads = nullptr;
  check(cudaMalloc(&pads, kBlocks * 256), "cudaMalloc pads");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  std::printf(
      "E7: %d blocks x %d rounds against each block's own pad, ns per round "
      "(local cost only: the NVLink cost needs two GPUs)\n",
      kBlocks, kRounds);
  std::printf("| signal | wait | ns per round |\n|---|---|---|\n");
  std::printf("| membar.sys + st.release.sys (production) | ld.acquire.sys spin | %.1f |\n",
              ns_per_round<true, true>(pads, s));
  std::printf("| st.release.sys | ld.acquire.sys spin | %.1f |\n",
              ns_per_round<false, true>(pads, s));
  std::printf("| membar.sys + st.release.sys | ld.relaxed.sys spin + fence.acq_rel.sys | %.1f |\n",
              ns_per_round<true, false>(pads, s));
  std::printf("| st.release.sys | ld.relaxed.sys spin + fence.acq_rel.sys | %.1f |\n",
              ns_per_round<false, false>(pads, s));
  cudaStreamDestroy(s);
  cudaFree(pads);
  return 0;
}

// E11: thread A captures a graph on its own stream in the global capture mode (as torch does);
// meanwhile thread B asks tpcomm's stream_is_capturing about the legacy default stream (what a
// tpcomm call on torch's default stream asks). 0 when A's capture survives.
int capture_query() {
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  check(cudaFree(nullptr), "context");
  std::atomic<int> stage{0};
  bool answer = false;
  cudaError_t after_query = cudaSuccess;
  std::thread b([&] {
    while (stage.load() != 1) std::this_thread::yield();
    answer = tpcomm::runtime::stream_is_capturing(nullptr);
    after_query = cudaGetLastError();
    stage.store(2);
  });
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "begin capture");
  tiny_kernel<<<1, 1, 0, s>>>(nullptr);
  stage.store(1);
  while (stage.load() != 2) std::this_thread::yield();
  tiny_kernel<<<1, 1, 0, s>>>(nullptr);
  const cudaError_t launch = cudaGetLastError();
  cudaGraph_t g = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &g);
  b.join();
  std::printf(
      "E11: stream_is_capturing(legacy stream) during another thread's global capture "
      "returned %s (error state after it: %s); the capturing thread's next launch: %s; "
      "its cudaStreamEndCapture: %s\n",
      answer ? "true" : "false", cudaGetErrorString(after_query), cudaGetErrorString(launch),
      cudaGetErrorString(end));
  if (g != nullptr) cudaGraphDestroy(g);
  cudaGetLastError();
  cudaStreamDestroy(s);
  if (end != cudaSuccess || launch != cudaSuccess) {
    std::printf(
        "E11 FAIL: tpcomm's capture query on the default stream invalidated another "
        "thread's graph capture (a tpcomm call on torch's default stream while torch "
        "captures on a side stream would break torch's graph)\n");
    return 1;
  }
  std::printf("E11 PASS: the other thread's capture survived the query\n");
  return 0;
}

}  // namespace tpcomm::latency
