// The latency program's ranks and clock (latency_harness.cuh).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "kernels/cuda/cuda_layout.hpp"
#include "latency_harness.cuh"

namespace tpcomm::latency {

namespace cuda = kernels::cuda;

Ranks::Ranks(int world) : ranks_(static_cast<std::size_t>(world)) {
  const cuda::WorkspaceLayout layout = cuda::workspace_layout(2 * kHalfBytes, 0);
  data_offset_ = layout.data_offset;
  for (Rank& r : ranks_) {
    check(cudaMalloc(&r.workspace, layout.total_bytes), "cudaMalloc workspace");
    check(cudaMemset(r.workspace, 0, layout.total_bytes), "cudaMemset workspace");
    check(cudaMalloc(&r.input, kIoBytes + 64), "cudaMalloc input");
    check(cudaMalloc(&r.output, kIoBytes + 64), "cudaMalloc output");
    check(cudaMemset(r.input, 0, kIoBytes + 64), "cudaMemset input");
    check(cudaMalloc(&r.slot, sizeof(std::uint64_t) * (1 + cuda::kMaxRanks)), "cudaMalloc slot");
    check(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaHostAlloc(reinterpret_cast<void**>(&r.abort_word), sizeof(std::int32_t),
                        cudaHostAllocMapped),
          "cudaHostAlloc abort word");
    check(cudaHostAlloc(reinterpret_cast<void**>(&r.failure), sizeof(KernelFailure),
                        cudaHostAllocMapped),
          "cudaHostAlloc failure record");
    *r.abort_word = 0;
    std::memset(r.failure, 0, sizeof(KernelFailure));
  }
  // Every rank's slot names every rank's input, flag set: the registered (in-place) path.
  std::vector<std::uint64_t> slot(1 + cuda::kMaxRanks, 0);
  slot[0] = 1;
  for (int q = 0; q < world; ++q) slot[1 + q] = reinterpret_cast<std::uint64_t>((*this)[q].input);
  for (Rank& r : ranks_) {
    check(cudaMemcpy(r.slot, slot.data(), slot.size() * sizeof(std::uint64_t),
                     cudaMemcpyHostToDevice),
          "cudaMemcpy slot");
  }
  check(cudaDeviceSynchronize(), "set-up");
}

Ranks::~Ranks() {
  cudaDeviceSynchronize();
  for (Rank& r : ranks_) {
    cudaFree(r.workspace);
    cudaFree(r.input);
    cudaFree(r.output);
    cudaFree(r.slot);
    cudaStreamDestroy(r.stream);
    cudaFreeHost(r.abort_word);
    cudaFreeHost(r.failure);
  }
}

KernelArgs Ranks::args(int rank, std::size_t bytes, int blocks, bool in_graph) const {
  KernelArgs a;
  a.op = cuda::KernelOp::kOneShot;
  a.type = cuda::kernel_code::kBFloat16;
  a.reduce = cuda::kernel_code::kSum;
  a.rank = rank;
  a.world = static_cast<int>(ranks_.size());
  a.blocks = cuda::blocks_for(blocks, bytes);  // the backend's clamp (2 KiB: one block)
  a.count = bytes / 2;
  for (int q = 0; q < a.world; ++q) a.peers[q] = ranks_[static_cast<std::size_t>(q)].workspace;
  a.data_offset = data_offset_;
  a.half_bytes = kHalfBytes;
  const Rank& r = ranks_[static_cast<std::size_t>(rank)];
  a.input = r.input;
  a.output = r.output;
  a.wait_budget_ns = 5'000'000'000ull;  // a peer that never comes is a failure, not a hang
  void* abort_on_device = nullptr;
  check(cudaHostGetDevicePointer(&abort_on_device, r.abort_word, 0), "abort word's device address");
  a.abort_word = static_cast<const volatile std::int32_t*>(abort_on_device);
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&a.failure), r.failure, 0),
        "failure record's device address");
  a.in_graph = in_graph ? 1 : 0;
  return a;
}

namespace {

// A reusable start line for the ranks' threads.
class StartLine {
 public:
  explicit StartLine(int n) : n_(n) {}
  void arrive() {
    const int gen = generation_.load();
    if (arrived_.fetch_add(1) + 1 == n_) {
      arrived_.store(0);
      generation_.fetch_add(1);
    } else {
      while (generation_.load() == gen) std::this_thread::yield();
    }
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Rank r's share of time_on_all_ranks; returns its eager and graph seconds.
void one_rank(int r, Ranks& ranks, const Launch& launch, StartLine& line, double* eager,
              double* graph) {
  cudaStream_t s = ranks[r].stream;
  for (int i = 0; i < 20; ++i) launch(r, s, false);  // warm-up
  check(cudaStreamSynchronize(s), "warm-up");
  line.arrive();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kEagerCalls; ++i) launch(r, s, false);
  check(cudaStreamSynchronize(s), "eager calls");
  *eager = seconds_since(t0);
  line.arrive();
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int i = 0; i < kGraphCalls; ++i) launch(r, s, true);
  check(cudaStreamEndCapture(s, &g), "end capture");
  check(cudaGraphInstantiate(&exec, g, 0), "instantiate");
  line.arrive();  // every rank's graph exists before any replays
  check(cudaGraphLaunch(exec, s), "warm-up replay");
  check(cudaStreamSynchronize(s), "warm-up replay");
  line.arrive();
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kReplays; ++i) check(cudaGraphLaunch(exec, s), "replay");
  check(cudaStreamSynchronize(s), "replays");
  *graph = seconds_since(t0);
  line.arrive();  // no rank's kernel waits for this one any more
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
}

}  // namespace

Timing time_on_all_ranks(Ranks& ranks, const Launch& launch) {
  const int w = ranks.world();
  StartLine line(w);
  std::vector<double> eager(static_cast<std::size_t>(w)), graph(static_cast<std::size_t>(w));
  std::vector<std::thread> threads;
  for (int r = 0; r < w; ++r) {
    threads.emplace_back(one_rank, r, std::ref(ranks), std::cref(launch), std::ref(line),
                         &eager[static_cast<std::size_t>(r)], &graph[static_cast<std::size_t>(r)]);
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < w; ++r) {
    if (ranks[r].failure->code != 0) {
      std::fprintf(stderr, "latency: rank %d's kernel recorded failure code %d (peer %d)\n", r,
                   ranks[r].failure->code, ranks[r].failure->peer);
      std::exit(1);
    }
  }
  Timing t;
  for (int r = 0; r < w; ++r) {  // the slowest rank's time: a call ends when every rank's has
    t.eager_us = std::max(t.eager_us, eager[static_cast<std::size_t>(r)] * 1e6 / kEagerCalls);
    t.graph_us =
        std::max(t.graph_us, graph[static_cast<std::size_t>(r)] * 1e6 / (kReplays * kGraphCalls));
  }
  return t;
}

}  // namespace tpcomm::latency
