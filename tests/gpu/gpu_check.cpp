// The GPU check (scripts/gpu-check.sh runs it on a machine with a GPU). It drives the custom
// backend directly, because W ranks sharing one GPU is not a group the planner admits (NCCL, the
// fallback, refuses two ranks on one device):
//
//   tpcomm_gpu_check correctness W   W ranks as threads, each with its own stream on GPU 0: every
//                                    algorithm x dtype x size (1 KiB-64 MiB, odd counts), eager
//                                    and CUDA graph, in and out of place, bitwise against a host
//                                    reference summed in rank order, and equal across ranks
//   tpcomm_gpu_check stall           2 ranks; rank 1 never calls: the watchdog error, not a hang
//   tpcomm_gpu_check timing W        time per call of each algorithm next to a device-to-device
//                                    copy of the same bytes
//   tpcomm_gpu_check process         under `tpcomm run -n 2`: real fd export/import between two
//                                    processes, with a copy check, and a captured call registered
//                                    through a CUDA IPC handle
//   tpcomm_gpu_check registration    under `tpcomm run -n 2`: captured calls on VMM memory
//                                    registered: 850 calls on 253 allocations, and an allocation
//                                    replaced at the same address (registration_check.cpp)
//   tpcomm_gpu_check multimem        what device 0 offers for multicast (the kernels need two
//                                    GPUs or more on an NVSwitch)
//   tpcomm_gpu_check failure         2 ranks: a timeout fails every rank's next launch, an abort
//                                    stops the peer's waiting kernel, a replay after a failure
//                                    traps (failure_check.cpp; leaves the context unusable)
//   tpcomm_gpu_check rmsnorm W       all_reduce_rmsnorm's custom kernels against a float64
//                                    reference, and timed against all-reduce + a norm kernel
//                                    (rmsnorm_check.cpp)
//   tpcomm_gpu_check deterministic W deterministic mode on the device: the custom kernels and
//                                    the rank-order kernel against host rank-order sums over
//                                    random slices (deterministic_check.cpp)
//   tpcomm_gpu_check communicator    under `TPCOMM_DISABLE=local tpcomm run -n 1`: a CUDA
//                                    communicator as a user creates it, NCCL carrying the calls
//                                    (communicator_check.cpp)
//
// Without a usable GPU it says why and exits 77 (ctest shows the test as skipped).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "communicator_check.hpp"
#include "cuda_check.hpp"
#include "deterministic_check.hpp"
#include "failure_check.hpp"
#include "kernels/cpu/convert.hpp"
#include "registration_check.hpp"
#include "rmsnorm_check.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"
#include "transport/cuda/driver_api.hpp"
#include "transport/cuda/vmm_workspace.hpp"
#include "transport/custom/custom_backend.hpp"
#include "transport/multimem/multicast_object.hpp"

namespace tpcomm {
namespace {

using gpu_check::check_cuda;
using kernels::cpu::bf16_to_float;
using kernels::cpu::float_to_bf16;
using kernels::cpu::float_to_fp16;
using kernels::cpu::fp16_to_float;
using transport::Call;
using transport::CollectiveBackend;

constexpr int kSkip = 77;
// Thread blocks per kernel: the W ranks' kernels share one GPU and must all be resident at once
// (each waits for the others), so W x blocks stays well under the SM count (132 on an H200; a
// block of 512 threads can take a whole SM's registers).
constexpr int kBlocksPerRank = 8;
constexpr std::chrono::milliseconds kTimeout{20000};

// Copies and fills on the rank's own stream, finished before returning. The ranks' streams are
// non-blocking, so a plain cudaMemcpy or cudaMemset (legacy default stream) is not ordered before
// their kernels, and a pageable upload can still be in flight when cudaMemcpy returns: on the
// H200 that raced a graph replay that reused its input in place.
void copy_on(cudaStream_t stream, void* dst, const void* src, std::size_t bytes, const char* what) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), what);
  check_cuda(cudaStreamSynchronize(stream), what);
}

void fill_on(cudaStream_t stream, void* dst, int byte, std::size_t bytes) {
  check_cuda(cudaMemsetAsync(dst, byte, bytes, stream), "cudaMemsetAsync");
  check_cuda(cudaStreamSynchronize(stream), "cudaMemsetAsync");
}

// Deterministic per (seed, index): every rank and the host reference regenerate the same data.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Random values in [-4, 4), already representable in the element type.
std::vector<std::uint8_t> make_input(DataType t, std::size_t count, std::uint64_t seed) {
  std::vector<std::uint8_t> out(count * size_of(t));
  for (std::size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(mix(seed * 0x100000001b3ULL + i) >> 40) / 2097152.0f - 4.0f;
    if (t == DataType::kFloat32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      const std::uint16_t h = t == DataType::kBFloat16 ? float_to_bf16(v) : float_to_fp16(v);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

float load(DataType t, const std::uint8_t* p, std::size_t i) {
  if (t == DataType::kFloat32) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return t == DataType::kBFloat16 ? bf16_to_float(h) : fp16_to_float(h);
}

void store(DataType t, std::uint8_t* p, std::size_t i, float v) {
  if (t == DataType::kFloat32) {
    std::memcpy(p + 4 * i, &v, 4);
  } else {
    const std::uint16_t h = t == DataType::kBFloat16 ? float_to_bf16(v) : float_to_fp16(v);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

// The kernels' order, written independently of them: fp32 accumulation starting from rank 0
// (sum, max, min; avg is the sum divided by W in fp32), then rounding to the element type.
std::vector<std::uint8_t> reference(DataType t, ReduceOp op,
                                    const std::vector<std::vector<std::uint8_t>>& in,
                                    std::size_t offset, std::size_t count) {
  std::vector<std::uint8_t> out(count * size_of(t));
  for (std::size_t i = 0; i < count; ++i) {
    float acc = load(t, in[0].data(), offset + i);
    for (std::size_t r = 1; r < in.size(); ++r) {
      const float x = load(t, in[r].data(), offset + i);
      acc = op == ReduceOp::kMax   ? std::fmax(acc, x)
            : op == ReduceOp::kMin ? std::fmin(acc, x)
                                   : acc + x;
    }
    if (op == ReduceOp::kAvg) acc /= static_cast<float>(in.size());
    store(t, out.data(), i, acc);
  }
  return out;
}

// What `rank` must hold after a call of `op` on every rank's `inputs` (`count` as in the call).
std::vector<std::uint8_t> expected_output(Op op, DataType t, ReduceOp reduce,
                                          const std::vector<std::vector<std::uint8_t>>& inputs,
                                          int rank, std::size_t count) {
  if (op == Op::kAllReduce) return reference(t, reduce, inputs, 0, count);
  if (op == Op::kReduceScatter) {
    return reference(t, reduce, inputs, static_cast<std::size_t>(rank) * count, count);
  }
  std::vector<std::uint8_t> all;
  for (const auto& in : inputs) all.insert(all.end(), in.begin(), in.end());
  return all;
}

// One rank's backend, set up as the communicator does: each step voted over the bootstrap.
std::unique_ptr<CollectiveBackend> set_up(std::shared_ptr<Bootstrap> bs, std::uint64_t comm_id,
                                          std::function<void(const std::string&)> on_failure,
                                          std::chrono::milliseconds timeout = kTimeout) {
  transport::BackendContext context;
  context.rank = bs->rank();
  context.size = bs->size();
  context.cuda.device = 0;
  context.bootstrap = bs;
  context.comm_id = comm_id;
  context.timeout = timeout;
  context.on_async_failure = std::move(on_failure);
  context.cuda.zero_copy =
      true;  // captured all-reduces may be registered (one process: raw addresses)
  auto backend = transport::make_custom_backend(context);
  for (int step = 0; step < backend->setup_steps(); ++step) {
    std::string error;
    try {
      backend->run_setup_step(step, Deadline::after(timeout));
    } catch (const std::exception& e) {
      error = e.what();
    }
    auto votes = bs->all_gather(Bytes(error.begin(), error.end()), "gpu check vote",
                                Deadline::after(timeout));
    for (std::size_t r = 0; r < votes.size(); ++r) {
      if (!votes[r].empty()) {
        throw Error(
            ErrorCode::kUnavailable,
            fmt::format("set-up step {} failed on rank {}: {}", backend->setup_step_name(step), r,
                        std::string(votes[r].begin(), votes[r].end())));
      }
    }
  }
  backend->setup_complete();
  return backend;
}

// Runs fn(rank, bootstrap) on W threads; the first exception is rethrown. The ranks share one
// GPU: calls that wait for the whole device (cudaFree, cudaMalloc) must never overlap a peer's
// kernel that waits for this thread's next launch, so every batch of launches starts after a
// barrier of the threads.
void on_threads(int world, const std::function<void(int, std::shared_ptr<Bootstrap>)>& fn) {
  auto group = make_thread_group(world);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        check_cuda(cudaSetDevice(0), "cudaSetDevice");
        fn(r, group[static_cast<std::size_t>(r)]);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

struct Case {
  const char* name;  // one_shot, two_shot, all_gather, reduce_scatter
  Op op;
  Algorithm algorithm;
};
const Case kCases[] = {{"one_shot", Op::kAllReduce, Algorithm::kOneShot},
                       {"two_shot", Op::kAllReduce, Algorithm::kTwoShot},
                       {"all_gather", Op::kAllGather, Algorithm::kOneShot},
                       {"reduce_scatter", Op::kReduceScatter, Algorithm::kOneShot}};
const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
const ReduceOp kReductions[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg};

// Sizes in bytes of the all-reduce buffer (odd element counts among them); the all-gather
// output and the reduce-scatter input have the same total, split over the ranks.
// From W = 8 up the 64 MiB size is left out: every rank regenerates all W inputs for its
// reference, W x W x 64 MiB of host work.
std::vector<std::size_t> element_counts(DataType t, int world) {
  const std::size_t es = size_of(t);
  std::vector<std::size_t> out;
  for (std::size_t bytes : {std::size_t{1} << 10, std::size_t{4} << 10, std::size_t{64} << 10,
                            std::size_t{1} << 20, std::size_t{9} << 20, std::size_t{64} << 20}) {
    if (world >= 8 && bytes > (std::size_t{9} << 20)) continue;
    out.push_back(bytes / es);
    if (bytes <= (std::size_t{9} << 20)) out.push_back(bytes / es + 3);  // odd, not a vector
  }
  return out;
}

// Element counts of a call's input and output for one rank, and the `count` argument.
struct Shape {
  std::size_t count, in_elems, out_elems;
};
Shape shape_of(Op op, std::size_t total, int world) {
  const auto w = static_cast<std::size_t>(world);
  if (op == Op::kAllReduce) return {total, total, total};
  const std::size_t per_rank = std::max<std::size_t>(1, total / w);
  if (op == Op::kAllGather) return {per_rank, per_rank, per_rank * w};
  return {per_rank, per_rank * w, per_rank};
}

int correctness(int world, int blocks) {
  std::atomic<long> checked{0};
  std::atomic<long> wrong{0};
  std::mutex print;
  on_threads(world, [&](int rank, std::shared_ptr<Bootstrap> bs) {
    auto backend =
        set_up(bs, 0xc0ffee00 + static_cast<std::uint64_t>(world),
               [](const std::string& why) { std::fprintf(stderr, "%s\n", why.c_str()); });
    cudaStream_t stream;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    const auto w = static_cast<std::size_t>(world);
    std::uint64_t sequence = 0;
    for (DataType t : kTypes) {
      const std::size_t es = size_of(t);
      for (std::size_t total : element_counts(t, world)) {
        if (rank == 0) {  // progress, so that a part that runs out of time shows where
          std::printf("  W=%d %s %zu elements\n", world, to_string(t).data(), total);
          std::fflush(stdout);
        }
        for (const Case& k : kCases) {
          for (ReduceOp op : kReductions) {
            // Every reduction of the reducing ops; max, min and avg eagerly, out of place, to 1
            // MiB.
            if (k.op == Op::kAllGather && op != ReduceOp::kSum) continue;
            if (op != ReduceOp::kSum && total * es > (std::size_t{1} << 20)) continue;
            const Shape s = shape_of(k.op, total, world);
            // Every rank's input, regenerated from the same seeds on every rank for the reference.
            std::vector<std::vector<std::uint8_t>> inputs;
            for (std::size_t r = 0; r < w; ++r) {
              inputs.push_back(make_input(t, s.in_elems, (total << 8) ^ (r << 4) ^ es));
            }
            const std::vector<std::uint8_t> expect =
                expected_output(k.op, t, op, inputs, rank, s.count);
            const std::size_t big = std::max(s.in_elems, s.out_elems) * es;
            void* a = nullptr;
            void* b = nullptr;
            // (4 elements more: room for the shifted variant)
            check_cuda(cudaMalloc(&a, big + 4 * es), "cudaMalloc");
            check_cuda(cudaMalloc(&b, big + 4 * es), "cudaMalloc");
            const bool large = total * es > (std::size_t{1} << 20);
            // Variant 0 out of place, 1 in place, 2 out of place with the input one element and
            // the output three elements past an aligned address (docs/gpu-kernels.md, "Copies at
            // any alignment": the kernels' copies then run 2- or 4-byte wide, not 16, on every
            // block, not only on the odd counts').
            for (int variant = 0; variant < 3; ++variant) {
              const bool in_place = variant == 1, shifted = variant == 2;
              for (int graph = 0; graph < 2; ++graph) {
                // The big sizes: eager, out of place.
                if (large && (variant != 0 || graph)) continue;
                if (op != ReduceOp::kSum && (variant != 0 || graph)) continue;
                if (shifted && graph) continue;
                Call c;
                c.op = k.op;
                c.type = t;
                c.count = s.count;
                c.algorithm = k.algorithm;
                c.reduce = op;
                c.blocks = blocks;
                c.sequence = ++sequence;
                c.stream = stream;
                c.output = in_place ? a : static_cast<std::uint8_t*>(b) + (shifted ? 3 * es : 0);
                // In place as NCCL defines it: the rank's own block of the larger buffer.
                auto* base = static_cast<std::uint8_t*>(a);
                c.input = in_place && k.op == Op::kAllGather ? base + rank * s.count * es
                                                             : base + (shifted ? es : 0);
                if (in_place && k.op == Op::kReduceScatter) c.output = base + rank * s.count * es;
                copy_on(stream, const_cast<void*>(c.input), inputs[rank].data(), s.in_elems * es,
                        "copy in");
                if (!in_place) fill_on(stream, c.output, 0xff, s.out_elems * es);
                bs->barrier("case start", Deadline::after(kTimeout));
                // Checks the output bitwise against the reference (hence across ranks).
                auto verify = [&](const char* how) {
                  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
                  std::vector<std::uint8_t> got(s.out_elems * es);
                  copy_on(stream, got.data(), c.output, got.size(), "copy out");
                  ++checked;
                  if (got == expect) return;
                  ++wrong;
                  std::size_t first = 0;
                  while (first < got.size() && got[first] == expect[first]) ++first;
                  std::lock_guard<std::mutex> lock(print);
                  std::printf("WRONG W=%d rank %d %s %s %s count %zu %s %s: first bad byte %zu\n",
                              world, rank, k.name, to_string(t).data(), to_string(op).data(),
                              s.count,
                              in_place  ? "in-place"
                              : shifted ? "out-of-place shifted"
                                        : "out-of-place",
                              how, first);
                };
                if (!graph) {
                  backend->run(c);
                  verify("eager");
                } else {
                  cudaGraph_t g;
                  cudaGraphExec_t exec;
                  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                             "begin capture");
                  c.captured = true;
                  backend->run(c);
                  check_cuda(cudaStreamEndCapture(stream, &g), "end capture");
                  check_cuda(cudaGraphInstantiate(&exec, g, 0), "instantiate");
                  // Replay 1 copies through the workspace; then the buffers are registered and
                  // replay 2 reads inputs in place where the call allows it (and needs fresh step
                  // numbers from the device counter either way).
                  for (int replay = 0; replay < 2; ++replay) {
                    if (replay == 1) {
                      const bool claims = k.op == Op::kAllReduce &&
                                          !(in_place && k.algorithm == Algorithm::kOneShot);
                      const std::size_t n =
                          backend->register_graph_buffers(Deadline::after(kTimeout));
                      if (n != (claims ? 1u : 0u)) {
                        ++wrong;
                        std::printf("WRONG W=%d rank %d %s: %zu buffers registered, expected %d\n",
                                    world, rank, k.name, n, claims ? 1 : 0);
                      }
                    }
                    if (in_place) {  // the last replay reduced the input away: restore it
                      copy_on(stream, const_cast<void*>(c.input), inputs[rank].data(),
                              s.in_elems * es, "copy in");
                    } else {
                      fill_on(stream, c.output, 0xff, s.out_elems * es);
                    }
                    bs->barrier("replay", Deadline::after(kTimeout));
                    check_cuda(cudaGraphLaunch(exec, stream), "graph launch");
                    verify(replay == 0 ? "graph" : "graph, registered");
                  }
                  cudaGraphExecDestroy(exec);
                  cudaGraphDestroy(g);
                }
              }
            }
            cudaFree(a);
            cudaFree(b);
          }
        }
      }
    }
    if (auto f = backend->take_async_failure()) throw Error(ErrorCode::kTimeout, *f);
    cudaStreamDestroy(stream);
  });
  std::printf("correctness W=%d, %d blocks: %ld results checked (all ranks), %ld wrong\n", world,
              blocks, checked.load(), wrong.load());
  return wrong.load() == 0 ? 0 : 1;
}

// Hundreds of back-to-back calls on one stream with no host synchronisation in between —
// mixed operations, algorithms, types, reductions and sizes (counts that are not multiples of W,
// of 8 or of the block count), every fifth one captured in a CUDA graph and launched — then every
// output checked against the host reference. Back-to-back launches reuse the two alternating
// data buffers as fast as the GPU allows, which is what the refill rule must survive.
int stress(int world, int blocks) {
  constexpr int kCalls = 300;
  std::atomic<long> wrong{0};
  on_threads(world, [&](int rank, std::shared_ptr<Bootstrap> bs) {
    auto backend =
        set_up(bs, 0x57e55000 + static_cast<std::uint64_t>(world),
               [](const std::string& why) { std::fprintf(stderr, "%s\n", why.c_str()); });
    cudaStream_t stream;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    const auto w = static_cast<std::size_t>(world);
    struct Planned {
      Call call;
      Shape shape;
      std::vector<std::uint8_t> expect;
      void* in = nullptr;
      void* out = nullptr;
      bool graph = false;
      cudaGraphExec_t exec = nullptr;
    };
    std::vector<Planned> plan(kCalls);
    for (int i = 0; i < kCalls; ++i) {  // the same choices on every rank: seeded by i only
      const std::uint64_t r = mix(static_cast<std::uint64_t>(i) + 0x5eed);
      const Case& k = kCases[r % 4];
      const DataType t = kTypes[(r >> 8) % 3];
      const ReduceOp op = k.op == Op::kAllGather ? ReduceOp::kSum : kReductions[(r >> 16) % 4];
      const std::size_t total = 1 + (r >> 24) % 70000;
      Planned& p = plan[static_cast<std::size_t>(i)];
      p.shape = shape_of(k.op, total, world);
      p.graph = i % 5 == 0;
      std::vector<std::vector<std::uint8_t>> inputs;
      for (std::size_t q = 0; q < w; ++q) {
        inputs.push_back(make_input(t, p.shape.in_elems, (static_cast<std::uint64_t>(i) << 8) ^ q));
      }
      p.expect = expected_output(k.op, t, op, inputs, rank, p.shape.count);
      const std::size_t es = size_of(t);
      check_cuda(cudaMalloc(&p.in, p.shape.in_elems * es), "cudaMalloc");
      check_cuda(cudaMalloc(&p.out, p.shape.out_elems * es), "cudaMalloc");
      copy_on(stream, p.in, inputs[static_cast<std::size_t>(rank)].data(), p.shape.in_elems * es,
              "copy in");
      Call& c = p.call;
      c.op = k.op;
      c.type = t;
      c.reduce = op;
      c.count = p.shape.count;
      c.algorithm = k.algorithm;
      c.blocks = blocks;
      c.sequence = static_cast<std::uint64_t>(i) + 1;
      c.stream = stream;
      c.input = p.in;
      c.output = p.out;
      // Captured and instantiated now, before any rank launches: instantiating can wait for the
      // whole device, where a peer's kernel would be waiting for this rank's next launch.
      if (p.graph) {
        cudaGraph_t g;
        check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
        c.captured = true;
        backend->run(c);
        check_cuda(cudaStreamEndCapture(stream, &g), "end capture");
        check_cuda(cudaGraphInstantiate(&p.exec, g, 0), "instantiate");
        cudaGraphDestroy(g);
      }
    }
    bs->barrier("stress start", Deadline::after(kTimeout));
    for (Planned& p : plan) {  // no host synchronisation until every call is queued
      if (p.graph) {
        check_cuda(cudaGraphLaunch(p.exec, stream), "graph launch");
      } else {
        backend->run(p.call);
      }
    }
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    bs->barrier("stress done", Deadline::after(kTimeout));
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const Planned& p = plan[i];
      std::vector<std::uint8_t> got(p.expect.size());
      copy_on(stream, got.data(), p.out, got.size(), "copy out");
      if (got != p.expect) {
        ++wrong;
        std::printf("WRONG stress W=%d rank %d call %zu: %s %s %s count %zu%s\n", world, rank, i,
                    to_string(p.call.op).data(), to_string(p.call.type).data(),
                    to_string(p.call.reduce).data(), p.call.count, p.graph ? " (graph)" : "");
      }
    }
    bs->barrier("stress checked", Deadline::after(kTimeout));  // every rank's kernels are done
    for (Planned& p : plan) {
      cudaFree(p.in);
      cudaFree(p.out);
      if (p.exec != nullptr) cudaGraphExecDestroy(p.exec);
    }
    if (auto f = backend->take_async_failure()) throw Error(ErrorCode::kTimeout, *f);
    cudaStreamDestroy(stream);
  });
  std::printf("stress W=%d, %d blocks: %d calls per rank back to back, %ld wrong\n", world, blocks,
              kCalls, wrong.load());
  return wrong.load() == 0 ? 0 : 1;
}

// Rank 1 never calls: rank 0's kernel must give up and the watchdog must report it.
int stall() {
  const auto timeout = std::chrono::milliseconds(2000);
  std::atomic<bool> reported{false};
  std::string text;
  std::mutex m;
  const auto started = std::chrono::steady_clock::now();
  double seconds = 0;
  on_threads(2, [&](int rank, std::shared_ptr<Bootstrap> bs) {
    auto backend = set_up(
        bs, 0x57a11,
        [&](const std::string& why) {
          std::lock_guard<std::mutex> lock(m);
          text = why;
          reported = true;
        },
        timeout);
    if (rank == 0) {
      cudaStream_t stream;
      check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
      void* buf = nullptr;
      check_cuda(cudaMalloc(&buf, 4096), "cudaMalloc");
      Call c;
      c.input = buf;
      c.output = buf;
      c.count = 1024;
      c.algorithm = Algorithm::kOneShot;
      c.stream = stream;
      backend->run(c);
      while (!reported && std::chrono::steady_clock::now() - started < 4 * timeout) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      backend->abort();
      check_cuda(cudaStreamSynchronize(stream), "the stalled kernel did not end");
      cudaFree(buf);
      cudaStreamDestroy(stream);
    }
    bs->barrier("stall done", Deadline::after(kTimeout));
  });
  if (!reported) {
    std::printf("stall: FAILED, no watchdog report within %.1f s\n", seconds);
    return 1;
  }
  std::printf("stall: watchdog after %.2f s (timeout 2 s): %s\n", seconds, text.c_str());
  return text.find("rank 1 did not signal") != std::string::npos ? 0 : 1;
}

// bf16, 2 KiB to 1 MiB (the decode sizes) and 16 MiB, each algorithm next to a device-to-device
// copy of the same bytes. The ranks share one GPU, so W x blocks must be resident at once.
int timing(int world, int blocks) {
  std::vector<std::string> rows;
  on_threads(world, [&](int rank, std::shared_ptr<Bootstrap> bs) {
    auto backend = set_up(bs, 0x7133 + static_cast<std::uint64_t>(world), nullptr);
    cudaStream_t stream;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    const DataType t = DataType::kBFloat16;
    for (std::size_t bytes :
         {std::size_t{2} << 10, std::size_t{8} << 10, std::size_t{32} << 10, std::size_t{128} << 10,
          std::size_t{512} << 10, std::size_t{1} << 20, std::size_t{16} << 20}) {
      void* a = nullptr;
      void* b = nullptr;
      check_cuda(cudaMalloc(&a, bytes), "cudaMalloc");
      check_cuda(cudaMalloc(&b, bytes), "cudaMalloc");
      fill_on(stream, a, 0, bytes);
      // Eager: calls launched one after another (host launch included). Graph: the same calls
      // captured into one graph and replayed (the GPU's time per call).
      auto time_us = [&](const std::function<void()>& call) -> std::pair<double, double> {
        constexpr int kIters = 50;
        auto elapsed_us = [&](const std::function<void()>& launch) {
          check_cuda(cudaEventRecord(start, stream), "event");
          launch();
          check_cuda(cudaEventRecord(stop, stream), "event");
          check_cuda(cudaEventSynchronize(stop), "sync");
          float ms = 0;
          cudaEventElapsedTime(&ms, start, stop);
          return 1000.0 * ms / kIters;
        };
        // Nobody launches while a peer thread may still be in cudaFree / cudaMalloc, which wait
        // for the whole device: a kernel waiting on that thread's next launch would never end.
        bs->barrier("timing start", Deadline::after(kTimeout));
        for (int i = 0; i < 5; ++i) call();
        check_cuda(cudaStreamSynchronize(stream), "sync");
        bs->barrier("timing", Deadline::after(kTimeout));
        const double eager = elapsed_us([&] {
          for (int i = 0; i < kIters; ++i) call();
        });
        // Instantiating can wait for the whole device too: every rank idle first.
        check_cuda(cudaStreamSynchronize(stream), "sync");
        bs->barrier("timing capture", Deadline::after(kTimeout));
        cudaGraph_t g;
        cudaGraphExec_t exec;
        check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
        for (int i = 0; i < kIters; ++i) call();
        check_cuda(cudaStreamEndCapture(stream, &g), "end capture");
        check_cuda(cudaGraphInstantiate(&exec, g, 0), "instantiate");
        check_cuda(cudaGraphUpload(exec, stream), "upload");
        check_cuda(cudaStreamSynchronize(stream), "sync");
        bs->barrier("timing replay", Deadline::after(kTimeout));
        check_cuda(cudaGraphLaunch(exec, stream), "graph launch");  // warm-up
        const double replay =
            elapsed_us([&] { check_cuda(cudaGraphLaunch(exec, stream), "graph launch"); });
        bs->barrier("timing replayed", Deadline::after(kTimeout));
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(g);
        return {eager, replay};
      };
      const auto copy = time_us([&] {
        check_cuda(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream), "copy");
      });
      for (const Case& k : kCases) {
        const Shape s = shape_of(k.op, bytes / 2, world);
        Call c;
        c.op = k.op;
        c.type = t;
        c.count = s.count;
        c.algorithm = k.algorithm;
        c.blocks = blocks;
        c.stream = stream;
        c.input = a;
        c.output = b;
        // Not flagged captured: no zero-copy slot is claimed, the graph copies as eager calls do.
        const auto us = time_us([&] { backend->run(c); });
        if (rank == 0) {
          rows.push_back(
              fmt::format("| {} | {} | {} | {} KiB | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f}x |",
                          world, blocks, k.name, bytes >> 10, us.first, us.second, copy.first,
                          copy.second, us.second / copy.second));
        }
      }
      cudaFree(a);
      cudaFree(b);
    }
    cudaStreamDestroy(stream);
  });
  std::printf(
      "| W | blocks | algorithm | bytes | eager us | graph us | D2D copy eager us | D2D copy "
      "graph us | graph / copy |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows) std::printf("%s\n", r.c_str());
  return 0;
}

// Two processes under tpcomm run: the workspaces travel as POSIX fds between processes.
// Two fd-exportable VMM allocations mapped back to back, and a buffer of `bytes` placed so that
// half of it lies in each.
struct TwoChunks {
  TwoChunks(std::size_t bytes, std::size_t granule) {
    const auto& d = transport::cuda::driver_api();
    chunk = (bytes / 2 + granule) / granule * granule;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    transport::cuda::check_cu(d.mem_address_reserve(&base, 2 * chunk, granule, 0, 0), "reserve");
    for (int i = 0; i < 2; ++i) {
      transport::cuda::check_cu(d.mem_create(&handles[i], chunk, &prop, 0), "cuMemCreate");
      transport::cuda::check_cu(d.mem_map(base + i * chunk, chunk, 0, handles[i], 0), "cuMemMap");
    }
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    transport::cuda::check_cu(d.mem_set_access(base, 2 * chunk, &access, 1), "cuMemSetAccess");
    input = reinterpret_cast<void*>(base + (chunk - bytes / 2) / 256 * 256);
  }
  ~TwoChunks() {
    const auto& d = transport::cuda::driver_api();
    d.mem_unmap(base, 2 * chunk);
    for (auto h : handles) d.mem_release(h);
    d.mem_address_free(base, 2 * chunk);
  }
  CUdeviceptr base = 0;
  std::size_t chunk = 0;
  CUmemGenericAllocationHandle handles[2] = {};
  void* input = nullptr;
};

int process() {
  auto bs = bootstrap_from_environment(Deadline::after(kTimeout));
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  auto backend = set_up(bs, 0x9f0c, nullptr);
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  const DataType t = DataType::kFloat32;
  const std::size_t count = (std::size_t{1} << 20) + 3;
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int r = 0; r < bs->size(); ++r) {
    inputs.push_back(make_input(t, count, 0xabc0 + static_cast<std::uint64_t>(r)));
  }
  const auto expect = reference(t, ReduceOp::kSum, inputs, 0, count);
  void* a = nullptr;
  void* b = nullptr;
  check_cuda(cudaMalloc(&a, count * 4), "cudaMalloc");
  check_cuda(cudaMalloc(&b, count * 4), "cudaMalloc");
  check_cuda(cudaMemcpy(a, inputs[static_cast<std::size_t>(bs->rank())].data(), count * 4,
                        cudaMemcpyHostToDevice),
             "copy in");
  int bad = 0;
  for (Algorithm algorithm : {Algorithm::kOneShot, Algorithm::kTwoShot}) {
    Call c;
    c.input = a;
    c.output = b;
    c.count = count;
    c.algorithm = algorithm;
    c.stream = stream;
    backend->run(c);
    check_cuda(cudaStreamSynchronize(stream), "sync");
    std::vector<std::uint8_t> got(count * 4);
    check_cuda(cudaMemcpy(got.data(), b, got.size(), cudaMemcpyDeviceToHost), "copy out");
    const bool ok = got == expect;
    bad += ok ? 0 : 1;
    std::printf("process rank %d: %s all-reduce across processes (fd export/import): %s\n",
                bs->rank(), to_string(algorithm).data(), ok ? "ok" : "WRONG");
  }
  // A captured one-shot, replayed once copying and once after registration, which in two
  // processes opens the peer's buffer: a cudaMalloc input through a CUDA IPC handle, a VMM input
  // (as PyTorch's expandable segments allocate) through its POSIX fd.
  transport::cuda::VmmWorkspace vmm_input;
  const std::size_t granule = transport::cuda::VmmWorkspace::granularity(0);
  vmm_input.create(0, (count * 4 + granule - 1) / granule * granule);
  check_cuda(cudaMemcpy(vmm_input.own(), inputs[static_cast<std::size_t>(bs->rank())].data(),
                        count * 4, cudaMemcpyHostToDevice),
             "copy in (VMM)");
  // A tensor across two VMM allocations mapped back to back (PyTorch's expandable segments map
  // each chunk as its own allocation): only the first chunk would be mapped by a peer, so it must
  // keep copying (registered 0) and still be right.
  TwoChunks split(count * 4, granule);
  check_cuda(cudaMemcpy(split.input, inputs[static_cast<std::size_t>(bs->rank())].data(), count * 4,
                        cudaMemcpyHostToDevice),
             "copy in (two chunks)");
  for (void* input : {a, vmm_input.own(), split.input}) {
    const char* kind = input == a                 ? "cudaMalloc input, IPC handle"
                       : input == vmm_input.own() ? "VMM input, POSIX fd"
                                                  : "VMM input across two allocations";
    const std::size_t want_registered = input == split.input ? 0 : 1;
    Call c;
    c.input = input;
    c.output = b;
    c.count = count;
    c.algorithm = Algorithm::kOneShot;
    c.stream = stream;
    c.captured = true;
    cudaGraph_t g;
    cudaGraphExec_t exec;
    check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
    backend->run(c);
    check_cuda(cudaStreamEndCapture(stream, &g), "end capture");
    check_cuda(cudaGraphInstantiate(&exec, g, 0), "instantiate");
    for (int replay = 0; replay < 2; ++replay) {
      std::size_t registered = 0;
      if (replay == 1) registered = backend->register_graph_buffers(Deadline::after(kTimeout));
      check_cuda(cudaMemset(b, 0xff, count * 4), "memset");
      bs->barrier("replay", Deadline::after(kTimeout));
      check_cuda(cudaGraphLaunch(exec, stream), "graph launch");
      check_cuda(cudaStreamSynchronize(stream), "sync");
      std::vector<std::uint8_t> got(count * 4);
      check_cuda(cudaMemcpy(got.data(), b, got.size(), cudaMemcpyDeviceToHost), "copy out");
      const bool ok = got == expect && (replay == 0 || registered == want_registered);
      bad += ok ? 0 : 1;
      std::printf("process rank %d: captured one_shot (%s), %s: %s\n", bs->rank(), kind,
                  replay == 0 ? "copying" : "registered",
                  ok ? "ok" : fmt::format("WRONG ({} registered)", registered).c_str());
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  }
  bs->barrier("process done", Deadline::after(kTimeout));
  return bad == 0 ? 0 : 1;
}

// multimem needs a multicast group of at least two GPUs on an NVSwitch. What one GPU can check:
// a driver of CUDA 12.1 or later must provide the multicast entry points (they were once asked
// for at the wrong version and multimem could never switch on), and a device that reports
// multicast support must not be refused for any other reason.
int multimem(int devices) {
  const std::string why = transport::cuda::MulticastObject::unsupported_reason(0);
  int driver = 0;
  cudaDriverGetVersion(&driver);
  std::printf("multimem: driver %d, device 0 multicast: %s\n", driver,
              why.empty() ? "supported" : why.c_str());
  if (driver >= 12010 && why.find("does not provide") != std::string::npos) {
    std::printf("multimem: FAIL: a %d driver has the multicast entry points\n", driver);
    return 1;
  }
  if (why.empty()) {
    // The device says it supports multicast: the driver steps of multimem's set-up must then
    // work, here on a group of this one device (create, add, bind a VMM workspace, map).
    try {
      const std::size_t want = std::size_t{2} << 20;
      const std::size_t g =  // both are powers of two
          std::max(transport::cuda::MulticastObject::granularity(1, want, false),
                   transport::cuda::VmmWorkspace::granularity(0));
      const std::size_t bytes = (want + g - 1) / g * g;
      transport::cuda::VmmWorkspace memory;
      memory.create(0, bytes);
      transport::cuda::MulticastObject object;
      object.create(1, bytes, false);
      object.add_device(0);
      void* mc = object.bind_and_map(memory.handle());
      std::printf("multimem: one-device multicast object set up (%zu bytes mapped at %p)\n", bytes,
                  mc);
    } catch (const std::exception& e) {
      std::printf("multimem: FAIL: device 0 reports multicast support but set-up failed: %s\n",
                  e.what());
      return 1;
    }
  }
  if (devices < 2) {
    std::printf(
        "multimem: kernels NOT CHECKED: a multicast group needs at least two GPUs (%d "
        "visible)\n",
        devices);
  }
  return 0;
}

int main_checked(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int world = argc > 2 ? std::atoi(argv[2]) : 2;
  if (std::string why = transport::cuda_unavailable_reason(); !why.empty()) {
    std::printf("SKIPPED (no GPU check possible here): %s\n", why.c_str());
    return kSkip;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED (no GPU check possible here): no CUDA device\n");
    return kSkip;
  }
  const int blocks = argc > 3 ? std::atoi(argv[3]) : kBlocksPerRank;
  if (mode == "correctness") return correctness(world, blocks);
  if (mode == "stress") return stress(world, blocks);
  if (mode == "stall") return stall();
  if (mode == "timing") return timing(world, blocks);
  if (mode == "process") return process();
  if (mode == "registration") {
    return gpu_check::registration_check(
        bootstrap_from_environment(Deadline::after(kTimeout)),
        [](std::shared_ptr<Bootstrap> bs) { return set_up(std::move(bs), 0x9f0e, nullptr); });
  }
  if (mode == "multimem") return multimem(devices);
  if (mode == "failure") {  // last in a run: its third part leaves the CUDA context unusable
    return gpu_check::failure_check(
        [](std::shared_ptr<Bootstrap> bs, std::uint64_t id,
           std::function<void(const std::string&)> on_failure, std::chrono::milliseconds t) {
          return set_up(std::move(bs), id, std::move(on_failure), t);
        },
        [](int ranks, const std::function<void(int, std::shared_ptr<Bootstrap>)>& fn) {
          on_threads(ranks, fn);
        });
  }
  if (mode == "communicator") return gpu_check::communicator_check();
  if (mode == "rmsnorm" || mode == "deterministic") {
    const auto check =
        mode == "rmsnorm" ? gpu_check::rmsnorm_check : gpu_check::deterministic_check;
    return check(
        world, blocks,
        [](std::shared_ptr<Bootstrap> bs, std::uint64_t id,
           std::function<void(const std::string&)> on_failure, std::chrono::milliseconds t) {
          return set_up(std::move(bs), id, std::move(on_failure), t);
        },
        [](int ranks, const std::function<void(int, std::shared_ptr<Bootstrap>)>& fn) {
          on_threads(ranks, fn);
        });
  }
  std::fprintf(stderr,
               "usage: tpcomm_gpu_check correctness W [BLOCKS] | stress W [BLOCKS] | stall | "
               "timing W [BLOCKS] | process | registration | multimem | communicator | rmsnorm W "
               "[BLOCKS] | deterministic W [BLOCKS] | failure\n");
  return 2;
}

}  // namespace
}  // namespace tpcomm

int main(int argc, char** argv) {
  try {
    return tpcomm::main_checked(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu check failed: %s\n", e.what());
    return 1;
  }
}
