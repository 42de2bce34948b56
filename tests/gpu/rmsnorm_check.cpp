// The GPU check's `rmsnorm` part (rmsnorm_check.hpp).
#include "rmsnorm_check.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_check.hpp"
#include "kernels/cuda/norm_kernel_args.hpp"
#include "support/typed_values.hpp"
#include "tpcomm/rmsnorm.hpp"

namespace tpcomm::gpu_check {
namespace {

constexpr std::chrono::milliseconds kTimeout{20000};
constexpr float kEps = 1e-5f;

using test::load;
using test::rounded;

using test::norm_value;
using test::norm_values;

// Wrong elements of rank 0's results against the float64 reference.
std::size_t wrong_elements(DataType t, std::size_t rows, std::size_t hidden, int world,
                           bool residual, const std::vector<std::uint8_t>& out,
                           const std::vector<std::uint8_t>& res_out) {
  std::size_t wrong = 0;
  for (std::size_t row = 0; row < rows; ++row) {
    std::vector<double> s(hidden), scale(hidden);
    double squares = 0;
    for (std::size_t j = 0; j < hidden; ++j) {
      const std::size_t i = row * hidden + j;
      s[j] = residual ? norm_value(t, -1, i) : 0.0;
      scale[j] = std::fabs(s[j]);
      for (int r = 0; r < world; ++r) {
        s[j] += norm_value(t, r, i);
        scale[j] += std::fabs(norm_value(t, r, i));
      }
      const double kept = rounded(t, static_cast<float>(s[j]));
      squares += kept * kept;
    }
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(hidden) + kEps);
    for (std::size_t j = 0; j < hidden; ++j) {
      const std::size_t i = row * hidden + j;
      const double w = norm_value(t, -2, j);
      if (!res_out.empty() &&
          std::fabs(load(t, res_out, i) - s[j]) > test::norm_tolerance(t, s[j], scale[j]))
        ++wrong;
      const double ref = rounded(t, static_cast<float>(s[j])) * inv * w;
      if (std::fabs(load(t, out, i) - ref) > test::norm_tolerance(t, ref, scale[j] * inv * w))
        ++wrong;
    }
  }
  return wrong;
}

struct Buffers {
  void *in = nullptr, *out = nullptr, *residual = nullptr, *res_out = nullptr, *weight = nullptr;
  void* sums = nullptr;
  cudaStream_t stream = nullptr;
  explicit Buffers(std::size_t bytes) {
    for (void** p : {&in, &out, &residual, &res_out, &weight, &sums}) {
      check_cuda(cudaMalloc(p, bytes), "cudaMalloc");
    }
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~Buffers() {
    cudaStreamDestroy(stream);
    for (void* p : {in, out, residual, res_out, weight, sums}) cudaFree(p);
  }
  void put(void* to, const std::vector<std::uint8_t>& b) const {
    check_cuda(cudaMemcpyAsync(to, b.data(), b.size(), cudaMemcpyDefault, stream), "copy in");
    check_cuda(cudaStreamSynchronize(stream), "copy in");
  }
  std::vector<std::uint8_t> get(const void* from, std::size_t bytes) const {
    std::vector<std::uint8_t> b(bytes);
    check_cuda(cudaMemcpyAsync(b.data(), from, bytes, cudaMemcpyDefault, stream), "copy out");
    check_cuda(cudaStreamSynchronize(stream), "copy out");
    return b;
  }
};

struct Shape {
  std::size_t rows, hidden;
};
constexpr Shape kShapes[] = {{1, 64}, {7, 1001}, {3, 4096}, {64, 8192}, {512, 4096}, {2, 16384}};
constexpr std::size_t kMaxBytes = 512 * 4096 * 4;
enum class Form { kOutOfPlace, kInPlace, kNoResidual, kGraph };

// One call of rank r's backend; its output and new residual (empty without one).
std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> call(
    transport::CollectiveBackend& backend, Buffers& b, int r, DataType t, Shape s, Algorithm a,
    Form form, int blocks, std::uint64_t seq) {
  const std::size_t n = s.rows * s.hidden, bytes = n * size_of(t);
  b.put(b.in, norm_values(t, r, n));
  b.put(b.residual, norm_values(t, -1, n));
  b.put(b.weight, norm_values(t, -2, s.hidden));
  RmsNorm norm;
  norm.weight = b.weight;
  norm.hidden = s.hidden;
  norm.eps = kEps;
  if (form != Form::kNoResidual) {
    norm.residual = b.residual;
    norm.residual_out = form == Form::kInPlace ? b.residual : b.res_out;
  }
  void* out = form == Form::kInPlace ? b.in : b.out;
  transport::Call c{.op = Op::kAllReduceRmsNorm,
                    .input = b.in,
                    .output = out,
                    .count = n,
                    .type = t,
                    .algorithm = a,
                    .sequence = seq,
                    .blocks = blocks,
                    .stream = b.stream,
                    .norm = &norm};
  if (form == Form::kGraph) {
    cudaGraph_t g;
    cudaGraphExec_t exec;
    check_cuda(cudaStreamBeginCapture(b.stream, cudaStreamCaptureModeThreadLocal), "capture");
    c.captured = true;
    backend.run(c);
    check_cuda(cudaStreamEndCapture(b.stream, &g), "end capture");
    check_cuda(cudaGraphInstantiate(&exec, g, 0), "instantiate");
    check_cuda(cudaGraphLaunch(exec, b.stream), "replay");
    check_cuda(cudaStreamSynchronize(b.stream), "replay");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  } else {
    backend.run(c);
    check_cuda(cudaStreamSynchronize(b.stream), "sync");
  }
  return {b.get(out, bytes),
          norm.residual_out ? b.get(norm.residual_out, bytes) : std::vector<std::uint8_t>()};
}

int correctness(int world, int blocks, const FailureSetUp& set_up, const OnThreads& on_threads) {
  struct Result {
    std::string what;
    std::vector<std::vector<std::uint8_t>> out, res;  // [rank]
    DataType t;
    Shape s;
    bool residual;
  };
  std::vector<Result> results;
  std::mutex m;
  on_threads(world, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto backend = set_up(bs, 0x4e52, nullptr, kTimeout);
    Buffers b(kMaxBytes);
    std::uint64_t seq = 0;
    std::size_t k = 0;
    for (Algorithm a : {Algorithm::kOneShot, Algorithm::kTwoShot}) {
      for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
        for (const Shape& s : kShapes) {
          const auto form = static_cast<Form>(k % 4);
          bs->barrier("rmsnorm call", Deadline::after(kTimeout));
          auto [out, res] = call(*backend, b, r, t, s, a, form, blocks, ++seq);
          std::lock_guard<std::mutex> lock(m);
          if (results.size() <= k) {
            results.push_back({fmt::format("{} {} {} x {} form {}", to_string(a), to_string(t),
                                           s.rows, s.hidden, static_cast<int>(form)),
                               std::vector<std::vector<std::uint8_t>>(world),
                               std::vector<std::vector<std::uint8_t>>(world), t, s,
                               form != Form::kNoResidual});
          }
          results[k].out[r] = std::move(out);
          results[k].res[r] = std::move(res);
          ++k;
        }
      }
    }
  });
  int wrong = 0;
  for (const auto& x : results) {
    std::size_t bad =
        wrong_elements(x.t, x.s.rows, x.s.hidden, world, x.residual, x.out[0], x.res[0]);
    bool same = true;
    for (int r = 1; r < world; ++r) same = same && x.out[r] == x.out[0] && x.res[r] == x.res[0];
    std::printf(
        "rmsnorm: %-42s %s\n", x.what.c_str(),
        bad == 0 && same
            ? "ok"
            : fmt::format("WRONG: {} elements off{}", bad, same ? "" : ", ranks differ").c_str());
    if (bad != 0 || !same) ++wrong;
  }
  return wrong;
}

// Microseconds per call over 50 launches on rank 0's stream (every rank launches alike).
double time_us(cudaStream_t stream, const std::function<void()>& launch) {
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 5; ++i) launch();
  check_cuda(cudaEventRecord(start, stream), "event");
  for (int i = 0; i < 50; ++i) launch();
  check_cuda(cudaEventRecord(stop, stream), "event");
  check_cuda(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / 50;
}

void timing(int world, int blocks, const FailureSetUp& set_up, const OnThreads& on_threads) {
  std::printf(
      "| W | hidden | rows | fused one-shot us | all-reduce + add+norm kernel us |\n"
      "|---|---|---|---|---|\n");
  on_threads(world, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto backend = set_up(bs, 0x4e53, nullptr, kTimeout);
    Buffers b(kMaxBytes);
    const DataType t = DataType::kBFloat16;
    std::uint64_t seq = 0;
    for (std::size_t hidden : {4096, 8192}) {
      for (std::size_t rows : {1, 8, 64, 512}) {
        const std::size_t n = rows * hidden;
        if (n * 2 > kMaxBytes) continue;
        b.put(b.in, norm_values(t, r, n));
        b.put(b.residual, norm_values(t, -1, n));
        b.put(b.weight, norm_values(t, -2, hidden));
        RmsNorm norm{b.residual, b.weight, b.res_out, hidden, kEps};
        transport::Call fused{.op = Op::kAllReduceRmsNorm,
                              .input = b.in,
                              .output = b.out,
                              .count = n,
                              .type = t,
                              .blocks = blocks,
                              .stream = b.stream,
                              .norm = &norm};
        transport::Call sum{.op = Op::kAllReduce,
                            .input = b.in,
                            .output = b.sums,
                            .count = n,
                            .type = t,
                            .blocks = blocks,
                            .stream = b.stream};
        kernels::cuda::NormArgs unfused{b.sums, false,      static_cast<int>(t), rows,
                                        hidden, b.residual, b.res_out,           b.weight,
                                        b.out,  kEps};
        bs->barrier("rmsnorm timing", Deadline::after(kTimeout));
        const double f = time_us(b.stream, [&] {
          fused.sequence = ++seq;
          backend->run(fused);
        });
        bs->barrier("rmsnorm timing", Deadline::after(kTimeout));
        const double u = time_us(b.stream, [&] {
          sum.sequence = ++seq;
          backend->run(sum);
          check_cuda(static_cast<cudaError_t>(kernels::cuda::launch_add_rmsnorm(unfused, b.stream)),
                     "add+norm kernel");
        });
        if (r == 0) std::printf("| %d | %zu | %zu | %.2f | %.2f |\n", world, hidden, rows, f, u);
      }
    }
  });
}

}  // namespace

int rmsnorm_check(int world, int blocks, const FailureSetUp& set_up, const OnThreads& on_threads) {
  const int wrong = correctness(world, blocks, set_up, on_threads);
  timing(world, blocks, set_up, on_threads);
  std::printf("rmsnorm: %d wrong\n", wrong);
  return wrong == 0 ? 0 : 1;
}

}  // namespace tpcomm::gpu_check
