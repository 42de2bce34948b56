// `tpcomm_gpu_check communicator`: the whole CUDA communicator on one GPU, as a user creates it,
// under `TPCOMM_DISABLE=local tpcomm run -n 1`. A group of one rank on one GPU is the only group
// NCCL accepts there (it refuses two ranks on one device), and with `local` disabled NCCL
// carries every call: probe, plan, voted set-up (dlopen, init), device calls on a stream, the
// NCCL watchdog thread, abort, teardown. Checked bitwise (one rank: every result is its input),
// then NCCL's time per all-reduce at 2 KiB-1 MiB, eager and in a CUDA graph.
#include "communicator_check.hpp"

#include "cuda_check.hpp"
#include "device_buffers.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "tpcomm/bootstrap.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/plan.hpp"
#include "tpcomm/types.hpp"
#include "transport/nccl/nccl_library.hpp"

namespace tpcomm::gpu_check {
namespace {

// Bytes of random-looking 16-bit halves in [0x0400, 0x3fff]: read as float16, bfloat16 or the
// high half of a float32, every value is a normal finite number (no NaN to make max/min
// ambiguous, no denormal that a flush-to-zero would change: the first H200 run saw NCCL's avg
// differ on data with denormals).
std::vector<std::uint8_t> normal_bytes(std::size_t bytes, std::uint32_t seed) {
  std::vector<std::uint8_t> out(bytes);
  std::uint32_t x = seed;
  for (std::size_t i = 0; i < bytes; i += 2) {
    x = x * 1664525u + 1013904223u;
    const auto h = static_cast<std::uint16_t>(0x0400 + (x >> 8) % (0x4000 - 0x0400));
    std::memcpy(out.data() + i, &h, std::min<std::size_t>(2, bytes - i));  // odd: uint8
  }
  return out;
}

using Device = DeviceBuffers;

// Every call x dtype (x reduction) once; returns the number of wrong results.
int check_calls(Communicator& comm, Device& d, std::size_t count) {
  int wrong = 0;
  auto expect = [&](const char* what, const void* p, const std::vector<std::uint8_t>& want) {
    const auto got = d.read(p, want.size());
    std::size_t first = 0;
    while (first < got.size() && got[first] == want[first]) ++first;
    if (first == got.size()) {
      std::printf("communicator: %-40s ok\n", what);
      return;
    }
    ++wrong;
    // The 4 bytes around it, as they came back and as they were.
    const std::size_t at = std::min(first / 4 * 4, got.size() - 4);
    std::printf(
        "communicator: %-40s WRONG: first bad byte %zu (bytes %zu-%zu: %02x%02x%02x%02x "
        "expected %02x%02x%02x%02x)\n",
        what, first, at, at + 3, got[at], got[at + 1], got[at + 2], got[at + 3], want[at],
        want[at + 1], want[at + 2], want[at + 3]);
  };
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt32,
                     DataType::kInt64, DataType::kUInt8}) {
    const std::size_t bytes = count * size_of(t);
    // Integers: the same random bytes, any bit pattern being a value.
    const auto data = normal_bytes(bytes, static_cast<std::uint32_t>(bytes));
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
      if (op == ReduceOp::kAvg && !is_floating(t)) continue;  // refused: integers have no avg
      d.write(d.in, data);
      comm.all_reduce(d.in, d.out, count, t, op, d.stream);
      expect(fmt::format("all_reduce {} {}", to_string(t), to_string(op)).c_str(), d.out, data);
    }
    d.write(d.in, data);
    comm.all_gather(d.in, d.out, count, t, d.stream);
    expect(fmt::format("all_gather {}", to_string(t)).c_str(), d.out, data);
    d.write(d.in, data);
    comm.reduce_scatter(d.in, d.out, count, t, ReduceOp::kSum, d.stream);
    expect(fmt::format("reduce_scatter {}", to_string(t)).c_str(), d.out, data);
    d.write(d.in, data);
    comm.broadcast(d.in, count, t, 0, d.stream);
    expect(fmt::format("broadcast {}", to_string(t)).c_str(), d.in, data);
    // The calls NCCL carries alone (grouped sends and receives, ncclReduce): on one rank each
    // moves the input to the output as it is.
    const std::vector<std::size_t> one{count};
    const std::vector<std::pair<const char*, std::function<void()>>> moves = {
        {"all_to_all", [&] { comm.all_to_all(d.in, d.out, count, t, d.stream); }},
        {"all_to_allv", [&] { comm.all_to_allv(d.in, one, d.out, one, t, d.stream); }},
        {"all_gatherv", [&] { comm.all_gatherv(d.in, d.out, one, t, d.stream); }},
        {"reduce_scatterv",
         [&] { comm.reduce_scatterv(d.in, d.out, one, t, ReduceOp::kSum, d.stream); }},
        {"gather", [&] { comm.gather(d.in, d.out, count, t, 0, d.stream); }},
        {"scatter", [&] { comm.scatter(d.in, d.out, count, t, 0, d.stream); }},
        {"reduce", [&] { comm.reduce(d.in, d.out, count, t, ReduceOp::kMax, 0, d.stream); }}};
    for (const auto& [name, call] : moves) {
      d.write(d.in, data);
      call();
      expect(fmt::format("{} {}", name, to_string(t)).c_str(), d.out, data);
    }
  }
  return wrong;
}

// Microseconds per bf16 all-reduce: 50 calls launched eagerly, and the same 50 in one graph.
void time_all_reduce(Communicator& comm, Device& d) {
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  constexpr int kIters = 50;
  auto elapsed_us = [&](const std::function<void()>& launch) {
    check_cuda(cudaEventRecord(start, d.stream), "event");
    launch();
    check_cuda(cudaEventRecord(stop, d.stream), "event");
    check_cuda(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return 1000.0 * ms / kIters;
  };
  std::printf("| W | backend | bytes | eager us | graph us |\n|---|---|---|---|---|\n");
  for (std::size_t kib : {2, 8, 32, 128, 512, 1024}) {
    const std::size_t count = kib * 1024 / 2;
    auto call = [&] {
      comm.all_reduce(d.in, d.out, count, DataType::kBFloat16, ReduceOp::kSum, d.stream);
    };
    for (int i = 0; i < 5; ++i) call();
    const double eager = elapsed_us([&] {
      for (int i = 0; i < kIters; ++i) call();
    });
    cudaGraph_t g;
    cudaGraphExec_t exec;
    check_cuda(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal), "capture");
    for (int i = 0; i < kIters; ++i) call();
    check_cuda(cudaStreamEndCapture(d.stream, &g), "end capture");
    check_cuda(cudaGraphInstantiate(&exec, g, 0), "instantiate");
    check_cuda(cudaGraphLaunch(exec, d.stream), "graph launch");  // warm-up
    const double graph =
        elapsed_us([&] { check_cuda(cudaGraphLaunch(exec, d.stream), "graph launch"); });
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    std::printf("| 1 | nccl | %zu KiB | %.2f | %.2f |\n", kib, eager, graph);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

}  // namespace

int communicator_check() {
  auto bootstrap = bootstrap_from_environment(Deadline::after(std::chrono::seconds(30)));
  CommunicatorOptions options;
  options.device = DeviceType::kCuda;
  options.cuda_device = 0;
  auto comm = Communicator::create(bootstrap, options);
  std::printf("%s\n", plan_to_json(comm->plan(), 2).c_str());
  int nccl_version = 0;
  transport::nccl_library().get_version(&nccl_version);
  std::printf("communicator: NCCL %d\n", nccl_version);
  const std::size_t count = (std::size_t{1} << 20) + 3;
  int wrong = 0;
  {
    Device d(count * 8);  // the widest type, int64
    wrong = check_calls(*comm, d, count);
    time_all_reduce(*comm, d);
    comm->abort("the GPU check aborts it");
    try {
      comm->all_reduce(d.in, d.out, count, DataType::kFloat32, ReduceOp::kSum, d.stream);
      std::printf("communicator: a call after abort() did not throw: WRONG\n");
      ++wrong;
    } catch (const Error& e) {
      std::printf("communicator: a call after abort() throws: %s\n", e.what());
    }
  }
  comm.reset();
  std::printf("communicator: %d wrong\n", wrong);
  return wrong == 0 ? 0 : 1;
}

}  // namespace tpcomm::gpu_check
