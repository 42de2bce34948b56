// The latency program's ranks and clock (latency_breakdown.cu, one_gpu_experiments.cu): W ranks
// of one process on GPU 0, each with a workspace laid out as the custom backend lays it out
// (cuda_layout.hpp), its own non-blocking stream, host-mapped abort word and failure record, and
// one host thread that launches its calls. The custom kernel itself is launched through
// launch_custom_kernel with KernelArgs filled as the backend fills them, so "full" and "barrier
// only" are the production kernel's code, not a copy of it.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "kernels/cuda/custom_kernel_args.hpp"

namespace tpcomm::latency {

using kernels::cuda::KernelArgs;
using kernels::cuda::KernelFailure;

// Fails the program with what failed: a benchmark with a broken CUDA call has no result to show.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "latency: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Rank {
  void* workspace = nullptr;
  cudaStream_t stream = nullptr;
  std::int32_t* abort_word = nullptr;  // host-mapped, as the backend's
  KernelFailure* failure = nullptr;    // host-mapped, as the backend's
  char* input = nullptr;
  char* output = nullptr;
  std::uint64_t* slot = nullptr;  // a graph buffer slot: [flag, input of rank 0..W-1]
};

// Each rank's two data buffers (the backend's are larger; every size measured here fits).
constexpr std::size_t kHalfBytes = std::size_t{8} << 20;
constexpr std::size_t kIoBytes = std::size_t{8} << 20;

class Ranks {
 public:
  explicit Ranks(int world);
  ~Ranks();
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  int world() const { return static_cast<int>(ranks_.size()); }
  Rank& operator[](int r) { return ranks_[static_cast<std::size_t>(r)]; }
  // KernelArgs as CustomBackend fills them for a one-shot bf16 sum of `bytes` per rank.
  KernelArgs args(int rank, std::size_t bytes, int blocks, bool in_graph) const;
  std::size_t data_offset() const { return data_offset_; }

 private:
  std::vector<Rank> ranks_;
  std::size_t data_offset_ = 0;
};

// One launch of rank r on its stream; in_graph: it is being captured.
using Launch = std::function<void(int rank, cudaStream_t stream, bool in_graph)>;

struct Timing {
  double eager_us = 0;  // per call, launched one after another by each rank's thread
  double graph_us = 0;  // per call, kGraphCalls captured in one graph per rank, replayed
};

constexpr int kEagerCalls = 200;
constexpr int kGraphCalls = 50;
constexpr int kReplays = 20;

// Times `launch` on every rank at once (one thread per rank, their calls wait for one another
// where the kernel signals): eager, then captured and replayed. Graphs are instantiated on every
// rank before any rank launches one (nothing that waits for the whole device may run while a
// peer's kernel waits, docs/gpu-check.md).
Timing time_on_all_ranks(Ranks& ranks, const Launch& launch);

}  // namespace tpcomm::latency
