// The GPU check's `deterministic` part (deterministic_check.hpp).
#include "deterministic_check.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_check.hpp"
#include "device_buffers.hpp"
#include "kernels/cuda/ordered_kernel_args.hpp"
#include "support/typed_values.hpp"

namespace tpcomm::gpu_check {
namespace {

constexpr std::chrono::milliseconds kTimeout{20000};
constexpr std::size_t kCount = 300001;
constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16};

using test::order_values;
using test::rank_order_sums;

struct Slice {
  std::size_t a, b;
};

// The same slices on every rank: the whole, its ends, and random ones of every size.
std::vector<Slice> slices() {
  std::mt19937_64 g(5);
  std::vector<Slice> out = {{0, kCount}, {0, 1}, {kCount - 1, kCount}, {3, 4099}};
  for (int k = 0; k < 6; ++k) {
    std::size_t a = g() % kCount, b = g() % kCount;
    if (a > b) std::swap(a, b);
    out.push_back({a, b + 1});
  }
  return out;
}

struct Form {
  const char* name;
  Op op;
  Algorithm algorithm;
};
constexpr Form kForms[] = {{"all_reduce one_shot", Op::kAllReduce, Algorithm::kOneShot},
                           {"all_reduce two_shot", Op::kAllReduce, Algorithm::kTwoShot},
                           {"reduce_scatter", Op::kReduceScatter, Algorithm::kOneShot}};

// Rank r's input of the call and the rank-order sums it must get back.
std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> call_data(const Form& f, DataType t,
                                                                          int r, int world,
                                                                          const Slice& s) {
  const std::size_t len = s.b - s.a;
  if (f.op == Op::kAllReduce) {
    return {order_values(t, r, s.a, len), rank_order_sums(t, world, s.a, len)};
  }
  std::vector<std::uint8_t> in;  // block q: elements [q n + a, q n + b) of this rank's vector
  for (int q = 0; q < world; ++q) {
    const auto block = order_values(t, r, static_cast<std::size_t>(q) * kCount + s.a, len);
    in.insert(in.end(), block.begin(), block.end());
  }
  return {in, rank_order_sums(t, world, static_cast<std::size_t>(r) * kCount + s.a, len)};
}

// Part 1: every rank checks its own results against the host's rank-order sums.
int custom_kernels(int world, int blocks, const FailureSetUp& set_up, const OnThreads& on_threads) {
  std::mutex m;
  int wrong = 0;
  std::vector<std::string> lines;
  on_threads(world, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto backend = set_up(bs, 0xde7e, nullptr, kTimeout);
    DeviceBuffers d(static_cast<std::size_t>(world) * kCount * 4);
    std::uint64_t seq = 0;
    for (const Form& f : kForms) {
      for (DataType t : kTypes) {
        int bad = 0;
        for (const Slice& s : slices()) {
          const auto [in, want] = call_data(f, t, r, world, s);
          d.write(d.in, in);
          bs->barrier("deterministic call", Deadline::after(kTimeout));
          backend->run(transport::Call{.op = f.op,
                                       .input = d.in,
                                       .output = d.out,
                                       .count = s.b - s.a,
                                       .type = t,
                                       .algorithm = f.algorithm,
                                       .sequence = ++seq,
                                       .blocks = blocks,
                                       .stream = d.stream});
          if (d.read(d.out, want.size()) != want) ++bad;
        }
        std::lock_guard<std::mutex> lock(m);
        if (r == 0 || bad != 0) {
          lines.push_back(fmt::format("deterministic: W={} rank {} {} {}, {} slices: {}", world, r,
                                      f.name, to_string(t), slices().size(),
                                      bad == 0 ? "ok" : fmt::format("WRONG ({} differ)", bad)));
        }
        wrong += bad;
      }
    }
  });
  for (const auto& line : lines) std::printf("%s\n", line.c_str());
  return wrong;
}

// Part 2: the rank-order kernel over slices whose blocks start on a vector and slices whose
// blocks do not (odd strides), each output byte against the host's.
int ordered_kernel(int world) {
  int wrong = 0;
  // The world blocks as NCCL's all-gather leaves them (block r at r x stride) in `in`.
  DeviceBuffers g(static_cast<std::size_t>(world) * kCount * 4, kCount * 4);
  for (DataType t : kTypes) {
    const std::size_t es = size_of(t);
    int bad = 0;
    for (const Slice& s : slices()) {
      const std::size_t len = s.b - s.a;
      std::vector<std::uint8_t> all;
      for (int r = 0; r < world; ++r) {
        const auto mine = order_values(t, r, s.a, len);
        all.insert(all.end(), mine.begin(), mine.end());
      }
      g.write(g.in, all);
      kernels::cuda::RankOrderArgs a;
      a.blocks = g.in;
      a.stride_bytes = len * es;
      a.world = world;
      a.count = len;
      a.type = static_cast<int>(t);
      a.reduce = static_cast<int>(ReduceOp::kSum);
      a.out = g.out;
      check_cuda(static_cast<cudaError_t>(kernels::cuda::launch_rank_order_reduce(a, g.stream)),
                 "rank-order kernel");
      if (g.read(g.out, len * es) != rank_order_sums(t, world, s.a, len)) ++bad;
    }
    std::printf("deterministic: W=%d rank-order kernel %s, %zu slices: %s\n", world,
                std::string(to_string(t)).c_str(), slices().size(),
                bad == 0 ? "ok" : fmt::format("WRONG ({} differ)", bad).c_str());
    wrong += bad;
  }
  return wrong;
}

// Part 3: microseconds per launch of the rank-order kernel, 50 launches timed by events.
void ordered_kernel_timing() {
  std::printf("| W | bytes per rank | rank-order kernel us |\n|---|---|---|\n");
  const std::size_t most = std::size_t{16} << 20;
  DeviceBuffers g(8 * most, most);
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  for (int world : {2, 4, 8}) {
    for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{1} << 20, most}) {
      kernels::cuda::RankOrderArgs a;
      a.blocks = g.in;
      a.stride_bytes = bytes;
      a.world = world;
      a.count = bytes / 2;
      a.type = static_cast<int>(DataType::kBFloat16);
      a.out = g.out;
      for (int i = 0; i < 5; ++i) kernels::cuda::launch_rank_order_reduce(a, g.stream);
      check_cuda(cudaEventRecord(start, g.stream), "event");
      for (int i = 0; i < 50; ++i) kernels::cuda::launch_rank_order_reduce(a, g.stream);
      check_cuda(cudaEventRecord(stop, g.stream), "event");
      check_cuda(cudaEventSynchronize(stop), "sync");
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      std::printf("| %d | %zu KiB | %.2f |\n", world, bytes >> 10, 1000.0 * ms / 50);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

}  // namespace

int deterministic_check(int world, int blocks, const FailureSetUp& set_up,
                        const OnThreads& on_threads) {
  int wrong = custom_kernels(world, blocks, set_up, on_threads);
  wrong += ordered_kernel(world);
  ordered_kernel_timing();
  std::printf("deterministic: %d wrong\n", wrong);
  return wrong == 0 ? 0 : 1;
}

}  // namespace tpcomm::gpu_check
