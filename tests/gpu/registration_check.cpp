// `tpcomm_gpu_check registration`, under `tpcomm run -n 2` on one GPU: registering captured
// calls whose inputs are VMM memory (as PyTorch's expandable segments allocate), between two
// processes, where descriptors travel as POSIX fds (docs/gpu-graphs.md, "Registering graph buffers
// in VMM memory"; experiments E3, E6).
//
//   many:   850 captured one-shot all-reduces, 600 of them in 3 allocations and one in each of
//           250 more: one descriptor per allocation (253, in two messages), every call
//           registered, every element of every output right after a replay. Before one
//           descriptor per allocation, the 850 descriptors were refused ("at most 200") and the
//           communicator aborted.
//   remap:  an allocation registered, then unmapped, released and replaced by new memory at the
//           same address, captured and registered again: the replay must read the new memory.
//           Before imports were made per round, the peer reused its import of the old memory
//           (keyed by address).
#include "registration_check.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "cuda_check.hpp"
#include "tpcomm/error.hpp"
#include "transport/cuda/driver_api.hpp"
#include "transport/cuda/vmm_workspace.hpp"

namespace tpcomm::gpu_check {
namespace {

constexpr std::chrono::milliseconds kTimeout{20000};
constexpr std::size_t kCount = 1024;  // floats per call

// Input of `rank` for call `call`, generation `gen`: integers, so every sum is exact.
float value(int rank, std::size_t call, int gen, std::size_t i) {
  return static_cast<float>((rank + 1) * 100000 + gen * 50000 + (call * 7 + i) % 9973);
}

std::vector<float> host_input(int rank, std::size_t call, int gen) {
  std::vector<float> v(kCount);
  for (std::size_t i = 0; i < kCount; ++i) v[i] = value(rank, call, gen, i);
  return v;
}

// Elements of `got` (call `call`'s output) that are not the sum over `world` ranks.
std::size_t wrong_elements(const std::vector<float>& got, int world, std::size_t call, int gen) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    float want = 0;
    for (int r = 0; r < world; ++r) want += value(r, call, gen, i);
    wrong += got[i] == want ? 0 : 1;
  }
  return wrong;
}

// Captures one one-shot all-reduce per input into one graph.
cudaGraphExec_t capture(transport::CollectiveBackend& backend, cudaStream_t stream,
                        const std::vector<const void*>& inputs, float* outputs) {
  cudaGraph_t g;
  cudaGraphExec_t exec;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    transport::Call c;
    c.input = inputs[k];
    c.output = outputs + k * kCount;
    c.count = kCount;
    c.algorithm = Algorithm::kOneShot;
    c.stream = stream;
    c.captured = true;
    backend.run(c);
  }
  check_cuda(cudaStreamEndCapture(stream, &g), "end capture");
  check_cuda(cudaGraphInstantiate(&exec, g, 0), "instantiate");
  cudaGraphDestroy(g);
  return exec;
}

// Registers, replays `exec` once and checks every output; prints one line.
int replay_and_check(Bootstrap& bs, transport::CollectiveBackend& backend, cudaStream_t stream,
                     cudaGraphExec_t exec, float* outputs, std::size_t calls, int gen,
                     const char* what) {
  const std::size_t registered = backend.register_graph_buffers(Deadline::after(kTimeout));
  check_cuda(cudaMemset(outputs, 0xff, calls * kCount * sizeof(float)), "memset");
  bs.barrier("registration replay", Deadline::after(kTimeout));
  check_cuda(cudaGraphLaunch(exec, stream), "graph launch");
  check_cuda(cudaStreamSynchronize(stream), "sync");
  std::vector<float> got(calls * kCount);
  check_cuda(cudaMemcpy(got.data(), outputs, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
             "copy out");
  std::size_t wrong = 0;
  for (std::size_t k = 0; k < calls; ++k) {
    std::vector<float> one(got.begin() + static_cast<std::ptrdiff_t>(k * kCount),
                           got.begin() + static_cast<std::ptrdiff_t>((k + 1) * kCount));
    wrong += wrong_elements(one, bs.size(), k, gen);
  }
  const bool ok = wrong == 0 && registered == calls;
  std::printf("registration rank %d: %s: %zu of %zu calls registered, %zu wrong elements: %s\n",
              bs.rank(), what, registered, calls, wrong, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

// E3: 850 captured calls, 600 in 3 allocations and 250 in one allocation each.
int many(Bootstrap& bs, transport::CollectiveBackend& backend, cudaStream_t stream) {
  const std::size_t granule = transport::cuda::VmmWorkspace::granularity(0);
  std::vector<std::unique_ptr<transport::cuda::VmmWorkspace>> allocations;
  std::vector<const void*> inputs;
  for (int a = 0; a < 3; ++a) {  // 200 inputs each, back to back
    allocations.push_back(std::make_unique<transport::cuda::VmmWorkspace>());
    const std::size_t bytes = 200 * kCount * sizeof(float);
    allocations.back()->create(0, (bytes + granule - 1) / granule * granule);
    for (std::size_t k = 0; k < 200; ++k)
      inputs.push_back(static_cast<float*>(allocations.back()->own()) + k * kCount);
  }
  for (int a = 0; a < 250; ++a) {
    allocations.push_back(std::make_unique<transport::cuda::VmmWorkspace>());
    allocations.back()->create(0, granule);
    inputs.push_back(allocations.back()->own());
  }
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const auto v = host_input(bs.rank(), k, 0);
    check_cuda(cudaMemcpy(const_cast<void*>(inputs[k]), v.data(), kCount * sizeof(float),
                          cudaMemcpyHostToDevice),
               "copy in");
  }
  float* outputs = nullptr;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&outputs), inputs.size() * kCount * sizeof(float)),
             "cudaMalloc");
  cudaGraphExec_t exec = capture(backend, stream, inputs, outputs);
  const int bad = replay_and_check(bs, backend, stream, exec, outputs, inputs.size(), 0,
                                   "850 calls on 253 VMM allocations");
  cudaGraphExecDestroy(exec);
  cudaFree(outputs);
  return bad;
}

// One granule of VA with an fd-exportable allocation mapped at it, replaceable in place (what
// PyTorch's expandable segments do on empty_cache or under memory pressure).
struct Remappable {
  explicit Remappable(std::size_t granule) : bytes(granule) {
    transport::cuda::check_cu(
        transport::cuda::driver_api().mem_address_reserve(&va, bytes, bytes, 0, 0),
        "cuMemAddressReserve");
    map_new();
  }
  ~Remappable() {
    const auto& d = transport::cuda::driver_api();
    unmap();
    d.mem_address_free(va, bytes);
  }
  void map_new() {
    const auto& d = transport::cuda::driver_api();
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    transport::cuda::check_cu(d.mem_create(&handle, bytes, &prop, 0), "cuMemCreate");
    transport::cuda::check_cu(d.mem_map(va, bytes, 0, handle, 0), "cuMemMap");
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    transport::cuda::check_cu(d.mem_set_access(va, bytes, &access, 1), "cuMemSetAccess");
  }
  void unmap() {
    const auto& d = transport::cuda::driver_api();
    d.mem_unmap(va, bytes);
    d.mem_release(handle);
  }
  CUdeviceptr va = 0;
  std::size_t bytes;
  CUmemGenericAllocationHandle handle = 0;
};

// E6: register a buffer, replace its memory at the same address, register again.
int remap(Bootstrap& bs, transport::CollectiveBackend& backend, cudaStream_t stream) {
  Remappable memory(transport::cuda::VmmWorkspace::granularity(0));
  float* outputs = nullptr;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&outputs), kCount * sizeof(float)), "cudaMalloc");
  int bad = 0;
  for (int gen = 0; gen < 2; ++gen) {
    if (gen == 1) {
      check_cuda(cudaDeviceSynchronize(), "sync before remapping");
      bs.barrier("before remapping", Deadline::after(kTimeout));
      memory.unmap();
      memory.map_new();
    }
    const auto v = host_input(bs.rank(), 0, gen);
    check_cuda(cudaMemcpy(reinterpret_cast<void*>(memory.va), v.data(), kCount * sizeof(float),
                          cudaMemcpyHostToDevice),
               "copy in");
    cudaGraphExec_t exec =
        capture(backend, stream, {reinterpret_cast<const void*>(memory.va)}, outputs);
    bad += replay_and_check(bs, backend, stream, exec, outputs, 1, gen,
                            gen == 0 ? "a VMM buffer" : "new memory at the same address");
    cudaGraphExecDestroy(exec);
  }
  cudaFree(outputs);
  return bad;
}

}  // namespace

int registration_check(std::shared_ptr<Bootstrap> bs, const BackendMaker& set_up) {
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  auto backend = set_up(bs);
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  int bad = many(*bs, *backend, stream);
  bad += remap(*bs, *backend, stream);
  bs->barrier("registration done", Deadline::after(kTimeout));
  return bad == 0 ? 0 : 1;
}

}  // namespace tpcomm::gpu_check
