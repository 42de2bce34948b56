// tpcomm_gpu_latency: where the custom one-shot all-reduce's time goes on one GPU, and the one-GPU
// timing experiments (docs/gpu-check.md, "The GPU check"). W ranks of one process share GPU 0
// (latency_harness.cuh); every row is timed eagerly (each rank's thread launching one call after
// another) and as 50 calls captured in one CUDA graph per rank and replayed.
//
//   tpcomm_gpu_latency breakdown      bf16 one-shot, W = 2, 2 KiB, 32 KiB, 1 MiB: a device-to-
//                                     device cudaMemcpyAsync, an empty kernel of the same grid,
//                                     the kernel's entry (step number, failure word), entry +
//                                     copy-in + reduction without the barrier, the production
//                                     kernel with no elements (entry + barrier), and the
//                                     production kernel; then the difference to the copy split
//                                     into those steps
//   tpcomm_gpu_latency unaligned      E8: one-shot with input and output 2 bytes off a
//                                     16-byte boundary, and reduce-scatter with a count per rank
//                                     that is not a multiple of 8, against the aligned cases
//   tpcomm_gpu_latency registered     E9: graph calls copying against registered (inputs
//                                     read in place), W = 4 and 8, 256 and 512 KiB, 8 blocks
//   tpcomm_gpu_latency barrier-cost   E7: one_gpu_experiments.cu
//   tpcomm_gpu_latency capture-query  E11: one_gpu_experiments.cu
//
// Without a usable GPU it says why and exits 77.
#include <cuda_bf16.h>

#include <cstring>
#include <string>

#include "kernels/cuda/kernel_common.cuh"
#include "latency_harness.cuh"

namespace tpcomm::latency {

int barrier_cost();   // one_gpu_experiments.cu
int capture_query();  // one_gpu_experiments.cu

namespace {

namespace cuda = kernels::cuda;
using bf16 = __nv_bfloat16;
constexpr int kProductionBlocks = 36;

// The workspace addresses the custom kernel uses (custom_kernels.cu: data, failed_word, steps).
__device__ char* data_of(const KernelArgs& a, int r, std::uint64_t step) {
  return static_cast<char*>(a.peers[r]) + a.data_offset + (step % 2) * a.half_bytes;
}
__device__ std::uint64_t* failed_word_of(const KernelArgs& a) {
  return reinterpret_cast<std::uint64_t*>(static_cast<char*>(a.peers[a.rank]) +
                                          cuda::workspace_layout(0, 0).failed_offset);
}
__device__ unsigned long long* steps_of(const KernelArgs& a) {
  return reinterpret_cast<unsigned long long*>(static_cast<char*>(a.peers[a.rank]) +
                                               cuda::workspace_layout(0, 0).steps_offset);
}

// The same grid and argument block as the custom kernel, doing nothing: the launch alone.
__global__ void __launch_bounds__(cuda::kThreads) empty_kernel(KernelArgs) {}

// What the custom kernel does before its first byte moves: its step number (LaunchStep) and
// the group's failure word (group_failed_on_entry), the same code from kernel_common.cuh.
__global__ void __launch_bounds__(cuda::kThreads) entry_kernel(KernelArgs a) {
  const cuda::LaunchStep launch_step(steps_of(a));
  cuda::group_failed_on_entry(failed_word_of(a), a.failure, a.rank, launch_step.number());
}

// The one-shot's data movement without its barrier: entry, copy_bytes into this rank's buffer,
// and reduce_range over every rank's buffer into the output (kernel_common.cuh). The peers'
// buffers are not awaited: the values are not checked, only the time.
template <int MaxW>
__global__ void __launch_bounds__(cuda::kThreads) copy_kernel(KernelArgs a) {
  constexpr std::size_t es = sizeof(bf16), unit = cuda::kVecBytes / es;
  const cuda::LaunchStep launch_step(steps_of(a));
  const std::uint64_t step = launch_step.number();
  if (cuda::group_failed_on_entry(failed_word_of(a), a.failure, a.rank, step)) return;
  const cuda::Range r =
      cuda::split_vectors(a.count, static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x), unit);
  cuda::copy_bytes(data_of(a, a.rank, step) + r.begin * es,
                   static_cast<const char*>(a.input) + r.begin * es, r.size() * es);
  __syncthreads();
  cuda::Sources<MaxW> s;
  for (int q = 0; q < MaxW; ++q) s.at[q] = q < a.world ? data_of(a, q, step) : nullptr;
  cuda::reduce_range<bf16, MaxW>(a.world, a.reduce, s, r.begin, r.end,
                                 static_cast<char*>(a.output));
}

void launch_checked(int error, const char* what) {
  check(static_cast<cudaError_t>(error), what);
}

void print_row(const std::string& size, const char* variant, const Timing& t) {
  std::printf("| %s | %s | %.2f | %.2f |\n", size.c_str(), variant, t.eager_us, t.graph_us);
}

std::string size_text(std::size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + " MiB"
                             : std::to_string(bytes >> 10) + " KiB";
}

int breakdown() {
  Ranks ranks(2);
  std::printf("W = 2 ranks on GPU 0, bf16 sum, one-shot; microseconds per call (slowest rank)\n");
  std::printf("| bytes | variant | eager | graph |\n|---|---|---|---|\n");
  for (std::size_t bytes : {std::size_t{2048}, std::size_t{32768}, std::size_t{1} << 20}) {
    auto kernel_args = [&](int r, bool g) { return ranks.args(r, bytes, kProductionBlocks, g); };
    const std::string size = size_text(bytes);
    const Timing d2d = time_on_all_ranks(ranks, [&](int r, cudaStream_t s, bool) {
      check(cudaMemcpyAsync(ranks[r].output, ranks[r].input, bytes, cudaMemcpyDeviceToDevice, s),
            "d2d copy");
    });
    const auto with_grid = [&](auto kernel) {
      return [&, kernel](int r, cudaStream_t s, bool g) {
        const KernelArgs a = kernel_args(r, g);
        kernel<<<a.blocks, cuda::kThreads, 0, s>>>(a);
        launch_checked(cudaGetLastError(), "variant launch");
      };
    };
    const Timing empty = time_on_all_ranks(ranks, with_grid(empty_kernel));
    const Timing entry = time_on_all_ranks(ranks, with_grid(entry_kernel));
    const Timing copy = time_on_all_ranks(ranks, with_grid(copy_kernel<2>));
    const Timing barrier = time_on_all_ranks(ranks, [&](int r, cudaStream_t s, bool g) {
      KernelArgs a = kernel_args(r, g);
      a.count = 0;  // the production kernel, same grid, nothing to move: entry + barrier
      launch_checked(cuda::launch_custom_kernel(a, s), "barrier-only launch");
    });
    const Timing full = time_on_all_ranks(ranks, [&](int r, cudaStream_t s, bool g) {
      launch_checked(cuda::launch_custom_kernel(kernel_args(r, g), s), "one-shot launch");
    });
    print_row(size, "d2d cudaMemcpyAsync", d2d);
    print_row(size, "empty kernel (same grid)", empty);
    print_row(size, "entry (step number, failure word)", entry);
    print_row(size, "entry + copy in + reduce, no barrier", copy);
    print_row(size, "production kernel, 0 elements (entry + barrier)", barrier);
    print_row(size, "production one-shot (full)", full);
    const auto split = [&](const char* how, double Timing::*m) {
      std::printf(
          "%s %s: full - d2d = %.2f us = launch of the grid (empty - d2d) %.2f + entry (entry - "
          "empty) %.2f + copy in and reduce (copy - entry) %.2f + barrier (full - copy) %.2f; the "
          "barrier alone (barrier - entry) %.2f\n",
          size.c_str(), how, full.*m - d2d.*m, empty.*m - d2d.*m, entry.*m - empty.*m,
          copy.*m - entry.*m, full.*m - copy.*m, barrier.*m - entry.*m);
    };
    split("graph", &Timing::graph_us);
    split("eager", &Timing::eager_us);
  }
  return 0;
}

// E8: the production kernel on inputs off a 16-byte boundary, next to the aligned case.
int unaligned() {
  Ranks ranks(2);
  std::printf("E8: W = 2, bf16 sum, microseconds per call (slowest rank)\n");
  std::printf("| bytes | variant | eager | graph |\n|---|---|---|---|\n");
  for (std::size_t bytes : {std::size_t{2048}, std::size_t{1} << 20}) {
    const std::string size = size_text(bytes);
    for (std::size_t off : {std::size_t{0}, std::size_t{2}}) {
      const Timing t = time_on_all_ranks(ranks, [&](int r, cudaStream_t s, bool g) {
        KernelArgs a = ranks.args(r, bytes, kProductionBlocks, g);
        a.input = ranks[r].input + off;
        a.output = ranks[r].output + off;
        launch_checked(cuda::launch_custom_kernel(a, s), "one-shot launch");
      });
      print_row(size, off == 0 ? "one-shot, aligned" : "one-shot, input and output at +2 bytes", t);
    }
    for (std::size_t less : {std::size_t{0}, std::size_t{3}}) {
      const std::size_t count = bytes / 2 / 2 - less;  // output elements per rank
      const Timing t = time_on_all_ranks(ranks, [&](int r, cudaStream_t s, bool g) {
        KernelArgs a = ranks.args(r, count * 2, kProductionBlocks, g);
        a.op = cuda::KernelOp::kReduceScatter;
        a.count = count;
        a.in_rank_stride = count * 2;
        launch_checked(cuda::launch_custom_kernel(a, s), "reduce-scatter launch");
      });
      print_row(size,
                less == 0 ? "reduce-scatter, count % 8 == 0"
                          : "reduce-scatter, count % 8 != 0 (rank blocks unaligned)",
                t);
    }
  }
  return 0;
}

// E9: graph calls that copy their inputs in against registered ones (read in place).
int registered() {
  std::printf("E9: bf16 sum, one-shot, 8 blocks per rank, microseconds per call\n");
  std::printf("| W, bytes | variant | eager | graph |\n|---|---|---|---|\n");
  for (int w : {4, 8}) {
    Ranks ranks(w);
    for (std::size_t bytes : {std::size_t{256} << 10, std::size_t{512} << 10}) {
      const std::string label = "W=" + std::to_string(w) + ", " + size_text(bytes);
      for (bool in_place : {false, true}) {
        const Timing t = time_on_all_ranks(ranks, [&](int r, cudaStream_t s, bool g) {
          KernelArgs a = ranks.args(r, bytes, 8, g);
          if (in_place) a.graph_slot = ranks[r].slot;
          launch_checked(cuda::launch_custom_kernel(a, s), "one-shot launch");
        });
        print_row(label, in_place ? "registered (inputs in place)" : "copying", t);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace tpcomm::latency

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::printf("tpcomm_gpu_latency: no usable GPU (%s); skipped\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    return 77;
  }
  const std::string mode = argc > 1 ? argv[1] : "";
  using namespace tpcomm::latency;
  if (mode == "breakdown") return breakdown();
  if (mode == "unaligned") return unaligned();
  if (mode == "registered") return registered();
  if (mode == "barrier-cost") return barrier_cost();
  if (mode == "capture-query") return capture_query();
  std::fprintf(stderr,
               "usage: tpcomm_gpu_latency breakdown | unaligned | registered | barrier-cost | "
               "capture-query\n");
  return 2;
}
