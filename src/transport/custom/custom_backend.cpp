// Set-up, calls and the watchdog of the custom backend.
#include "custom_backend.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "graph_buffers.hpp"
#include "tpcomm/error.hpp"
#include "transport/cuda/chunked_launch.hpp"
#include "transport/cuda/device_guard.hpp"
#include "transport/cuda/driver_api.hpp"
#include "transport/cuda/fd_channel.hpp"
#include "transport/cuda/group_failure.hpp"
#include "transport/cuda/kernel_failure_text.hpp"
#include "transport/cuda/kernel_names.hpp"
#include "transport/cuda/kernel_watchdog.hpp"
#include "transport/cuda/vmm_workspace.hpp"

static_assert(tpcomm::transport::cuda::kernel_code::kFloat32 ==
                      static_cast<int>(tpcomm::DataType::kFloat32) &&
                  tpcomm::transport::cuda::kernel_code::kFloat16 ==
                      static_cast<int>(tpcomm::DataType::kFloat16) &&
                  tpcomm::transport::cuda::kernel_code::kBFloat16 ==
                      static_cast<int>(tpcomm::DataType::kBFloat16),
              "kernel data type codes must match tpcomm::DataType");
static_assert(
    tpcomm::transport::cuda::kernel_code::kSum == static_cast<int>(tpcomm::ReduceOp::kSum) &&
        tpcomm::transport::cuda::kernel_code::kMax == static_cast<int>(tpcomm::ReduceOp::kMax) &&
        tpcomm::transport::cuda::kernel_code::kMin == static_cast<int>(tpcomm::ReduceOp::kMin) &&
        tpcomm::transport::cuda::kernel_code::kAvg == static_cast<int>(tpcomm::ReduceOp::kAvg),
    "kernel reduction codes must match tpcomm::ReduceOp");

namespace tpcomm::transport {
namespace {

// Each of the two data buffers per rank; larger calls run in chunks of this size.
constexpr std::size_t kBufferBytes = 8u << 20;

using cuda::KernelArgs;
using cuda::KernelOp;

constexpr std::uint64_t kProbeMagic = 0x7470636f6d6d0000ULL;  // "tpcomm\0\0" + sender, receiver

class CustomBackend final : public CollectiveBackend {
 public:
  explicit CustomBackend(BackendContext context) : ctx_(std::move(context)) {}
  // A kernel of ours still waiting (for a dead peer, or one that never calls) would outlive the
  // memory it waits on: the abort word ends it, and the device is drained before the workspace
  // goes. All of it, the members' destructors included, on this communicator's device; the
  // caller's comes back after (docs/gpu-graphs.md, "The caller's current device").
  ~CustomBackend() override {
    if (!watchdog_.created()) return;
    watchdog_.abort();
    if (teardown_device_.enter(ctx_.cuda.device)) cudaDeviceSynchronize();
    if (abort_stream_ != nullptr) cudaStreamDestroy(abort_stream_);
    cudaGetLastError();
  }

  Backend kind() const override { return Backend::kCustom; }
  int setup_steps() const override { return 3; }
  std::string setup_step_name(int step) const override {
    static const char* names[] = {"custom.workspace", "custom.exchange", "custom.peer_probe"};
    return names[step];
  }

  void run_setup_step(int step, const Deadline& deadline) override {
    if (step == 0) return create_workspace();
    // The caller's current device comes back after each step.
    const cuda::DeviceGuard on_device(ctx_.cuda.device);
    if (step == 1) return exchange_and_map(deadline);
    probe_peers(deadline);
  }

  void setup_complete() override {
    // Kept where VMM graph buffers may need it (their descriptors travel over it).
    if (!ctx_.cuda.zero_copy) listener_.reset();
    watchdog_.start(ctx_.on_async_failure);
  }

  // (A failure of an earlier call is picked up by the communicator before this one.)
  void run(const Call& c) override {
    const cuda::DeviceGuard on_device(ctx_.cuda.device);
    const std::size_t es = size_of(c.type);
    KernelArgs a = base_args_;
    a.type = static_cast<int>(c.type);
    a.reduce = static_cast<int>(c.reduce);
    a.in_graph = c.captured ? 1 : 0;
    if (c.op == Op::kAllReduceRmsNorm) return run_rmsnorm(c, a);
    a.blocks = cuda::blocks_for(std::clamp(c.blocks > 0 ? c.blocks : 16, 1, cuda::kMaxBlocks),
                                c.count * es);
    const bool rs = c.op == Op::kReduceScatter;
    a.op = c.op == Op::kAllGather               ? KernelOp::kAllGather
           : rs                                 ? KernelOp::kReduceScatter
           : c.algorithm == Algorithm::kTwoShot ? KernelOp::kTwoShot
                                                : KernelOp::kOneShot;
    const std::size_t per_chunk = cuda::chunk_elements(kBufferBytes, es, rs ? ctx_.size : 1);
    // One-shot in place cannot read inputs in place: a rank would overwrite its input while
    // peers still read it.
    const bool in_place_one_shot = a.op == KernelOp::kOneShot && c.input == c.output;
    if (c.captured && ctx_.cuda.zero_copy && c.op == Op::kAllReduce && !in_place_one_shot &&
        c.count > 0) {
      a.graph_slot = graph_buffers_.claim(c.input, c.count * size_of(c.type));
      a.unregistered_op =
          c.unregistered_algorithm == Algorithm::kTwoShot ? KernelOp::kTwoShot : KernelOp::kOneShot;
    }
    cuda::launch_in_chunks(c, per_chunk, a, cuda::launch_custom_kernel,
                           "launching the custom kernel");
  }

  // all_reduce_rmsnorm in launches of whole rows: a buffer's worth for one-shot, half of one for
  // two-shot (whose new residual rows take the other half), a block per row up to the row's
  // blocks. Every rank launches as many as its peers: the rows are the same on every rank.
  void run_rmsnorm(const Call& c, KernelArgs a) {
    const RmsNorm& norm = *c.norm;
    const std::size_t row_bytes = norm.hidden * size_of(c.type);
    const bool two_shot = c.algorithm == Algorithm::kTwoShot;
    const std::size_t room = (two_shot ? kBufferBytes / 2 : kBufferBytes) / row_bytes;
    if (room == 0) {
      throw invalid_input(
          fmt::format("custom: a row of {} bytes does not fit {} bytes of workspace", row_bytes,
                      two_shot ? kBufferBytes / 2 : kBufferBytes));
    }
    a.op = two_shot ? KernelOp::kTwoShotRmsNorm : KernelOp::kOneShotRmsNorm;
    a.hidden = norm.hidden;
    a.eps = norm.eps;
    a.weight = norm.weight;
    const std::size_t rows = c.count / norm.hidden;
    for (std::size_t first = 0; first < rows || first == 0; first += room) {
      const std::size_t n = std::min(room, rows - first);
      const std::size_t at = first * row_bytes;
      a.count = n * norm.hidden;
      a.input = static_cast<const char*>(c.input) + at;
      a.output = static_cast<char*>(c.output) + at;
      a.residual = norm.residual ? static_cast<const char*>(norm.residual) + at : nullptr;
      a.residual_out = norm.residual_out ? static_cast<char*>(norm.residual_out) + at : nullptr;
      const int asked = std::clamp(c.blocks > 0 ? c.blocks : 16, 1, cuda::kMaxBlocks);
      a.blocks = static_cast<int>(std::clamp<std::size_t>(n, 1, static_cast<std::size_t>(asked)));
      cuda::check_cuda(cuda::launch_custom_kernel(a, c.stream), "launching the custom kernel");
      if (rows == 0) break;
    }
  }

  // The group's failure word first, then this rank's abort word (the order the signalling model
  // requires, docs/gpu-kernels.md "The signalling protocol, checked"): the word is written into
  // every rank's workspace through the mappings and waited for, so no kernel of this rank stops on
  // the abort word (a graph replay would trap, and the host's writes through that context would
  // never happen) before every peer's kernels can see the failure.
  void abort() override {
    publish_abort_to_group();
    watchdog_.abort();
  }

  std::size_t register_graph_buffers(const Deadline& deadline) override {
    const cuda::DeviceGuard on_device(ctx_.cuda.device);
    return graph_buffers_.register_all(*ctx_.bootstrap, listener_.get(), fd_auth_, deadline);
  }

  std::optional<std::string> take_async_failure() override { return watchdog_.take_failure(); }

 private:
  void publish_abort_to_group() {
    if (abort_stream_ == nullptr || base_args_.peers[ctx_.rank] == nullptr) return;
    std::vector<std::uint64_t*> words;
    for (int p = 0; p < ctx_.size; ++p) {
      if (base_args_.peers[p] != nullptr) words.push_back(failed_word(p));
    }
    cuda::publish_group_failure(ctx_.cuda.device, failed_word(ctx_.rank), words,
                                cuda::group_failure_value(2, ctx_.rank), abort_stream_);
  }

  void create_workspace() {
    if (std::string why = cuda::gpu_unavailable_reason(); !why.empty()) {
      throw Error(ErrorCode::kUnavailable, why);
    }
    const cuda::DeviceGuard on_device(ctx_.cuda.device);
    const auto layout = cuda::workspace_layout(
        2 * kBufferBytes, cuda::VmmWorkspace::granularity(ctx_.cuda.device, sharing()));
    workspace_.create(ctx_.cuda.device, layout.total_bytes, sharing());
    watchdog_.create("custom kernel",
                     cuda::kernel_wait_budget(ctx_.timeout, ctx_.cuda.kernel_timeout));
    failed_offset_ = layout.failed_offset;
    cuda::check_cuda(cudaStreamCreateWithFlags(&abort_stream_, cudaStreamNonBlocking),
                     "cudaStreamCreateWithFlags (abort stream)");
    base_args_.rank = ctx_.rank;
    base_args_.world = ctx_.size;
    base_args_.data_offset = layout.data_offset;
    base_args_.half_bytes = kBufferBytes;
    base_args_.abort_word = watchdog_.device_abort_word();
    base_args_.failure = watchdog_.device_failure();
    base_args_.wait_budget_ns = watchdog_.wait_budget_ns();
    graph_buffers_.create(ctx_.cuda.device, ctx_.cuda.graph_slots);
    if (!ctx_.spans_nodes()) {
      // A random name (nobody can take it first), announced to the group in custom.exchange.
      cuda::FdListener listener = cuda::listen_fd_channel(ctx_.comm_id, ctx_.rank);
      listener_ = std::move(listener.socket);
      listener_name_ = std::move(listener.name);
    }
  }

  cuda::VmmWorkspace::Sharing sharing() const {
    return ctx_.spans_nodes() ? cuda::VmmWorkspace::Sharing::kFabric
                              : cuda::VmmWorkspace::Sharing::kPosixFd;
  }

  void exchange_and_map(const Deadline& deadline) {
    if (ctx_.spans_nodes()) return exchange_fabric_handles(deadline);
    net::Fd mine = workspace_.export_fd();
    fd_auth_ = cuda::agree_fd_channel(*ctx_.bootstrap, ctx_.comm_id, listener_name_, deadline);
    auto fds =
        cuda::exchange_handles(fd_auth_, listener_.get(), mine.get(), workspace_.bytes(), deadline);
    for (int p = 0; p < ctx_.size; ++p) {
      base_args_.peers[p] =
          p == ctx_.rank
              ? workspace_.own()
              : workspace_.map_peer(fds[static_cast<std::size_t>(p)].get(), workspace_.bytes());
    }
  }

  // Across the nodes of one NVLink clique: fabric handles (plain bytes) through the bootstrap.
  void exchange_fabric_handles(const Deadline& deadline) {
    const CUmemFabricHandle mine = workspace_.export_fabric();
    Bytes out(sizeof(mine));
    std::memcpy(out.data(), &mine, sizeof(mine));
    auto all = ctx_.bootstrap->all_gather(out, "custom fabric handles", deadline);
    for (int p = 0; p < ctx_.size; ++p) {
      const Bytes& got = all[static_cast<std::size_t>(p)];
      if (got.size() != sizeof(CUmemFabricHandle)) {
        throw Error(ErrorCode::kMismatch,
                    fmt::format("rank {} sent a {}-byte fabric handle", p, got.size()));
      }
      CUmemFabricHandle h;
      std::memcpy(&h, got.data(), sizeof(h));
      base_args_.peers[p] =
          p == ctx_.rank ? workspace_.own() : workspace_.map_peer(h, workspace_.bytes());
    }
  }

  // Drivers can claim peer access that does not work: every rank writes a value into every
  // peer's workspace through its mapping, and after a barrier reads back what each peer wrote.
  void probe_peers(const Deadline& deadline) {
    const std::size_t at = base_args_.data_offset;
    for (int p = 0; p < ctx_.size; ++p) {
      const std::uint64_t v = kProbeMagic | (static_cast<std::uint64_t>(ctx_.rank) << 8) |
                              static_cast<std::uint64_t>(p);
      cuda::check_cuda(
          cudaMemcpy(static_cast<char*>(base_args_.peers[p]) + at + std::size_t{8} * ctx_.rank, &v,
                     8, cudaMemcpyDefault),
          "writing the peer probe");
    }
    cuda::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (peer probe)");
    ctx_.bootstrap->barrier("custom peer probe", deadline);
    std::vector<std::uint64_t> got(static_cast<std::size_t>(ctx_.size));
    cuda::check_cuda(cudaMemcpy(got.data(), static_cast<char*>(workspace_.own()) + at,
                                8 * got.size(), cudaMemcpyDefault),
                     "reading the peer probe");
    for (int q = 0; q < ctx_.size; ++q) {
      const std::uint64_t want = kProbeMagic | (static_cast<std::uint64_t>(q) << 8) |
                                 static_cast<std::uint64_t>(ctx_.rank);
      if (got[static_cast<std::size_t>(q)] != want) {
        throw Error(ErrorCode::kUnavailable,
                    fmt::format("peer access probe: rank {}'s write through its mapping did not "
                                "arrive (read {:#018x}, expected {:#018x}); peer access is "
                                "claimed but does not work",
                                q, got[static_cast<std::size_t>(q)], want));
      }
    }
    // Leave the data area as the kernels expect it: zero.
    cuda::check_cuda(cudaMemset(static_cast<char*>(workspace_.own()) + at, 0, 8 * got.size()),
                     "clearing the peer probe");
    cuda::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (peer probe)");
    ctx_.bootstrap->barrier("custom peer probe done", deadline);
  }

  // Rank p's copy of the group's failure word, through this process's mapping.
  std::uint64_t* failed_word(int p) const {
    return reinterpret_cast<std::uint64_t*>(static_cast<char*>(base_args_.peers[p]) +
                                            failed_offset_);
  }

  // First, so destroyed last: entered by the destructor, it keeps this device current while the
  // other members go (the workspace's and graph buffers' releases), and gives the caller's back
  // after them.
  cuda::DeviceGuard teardown_device_;
  BackendContext ctx_;
  cuda::VmmWorkspace workspace_;
  cuda::GraphBuffers graph_buffers_;
  net::Fd listener_;
  std::string listener_name_;
  cuda::FdChannelAuth fd_auth_;  // who may send on listener_ (agreed in custom.exchange)
  KernelArgs base_args_;
  cuda::KernelWatchdog watchdog_;
  std::size_t failed_offset_ = 0;        // the group's failure word in every workspace
  cudaStream_t abort_stream_ = nullptr;  // abort()'s writes, beside a kernel that waits
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_custom_backend(const BackendContext& context) {
  if (context.size < 2 || context.size > cuda::kMaxRanks) {
    throw invalid_input(
        fmt::format("custom backend: {} ranks, expected 2 to {}", context.size, cuda::kMaxRanks));
  }
  return std::make_unique<CustomBackend>(context);
}

std::string cuda_unavailable_reason() {
  return cuda::gpu_unavailable_reason();
}

}  // namespace tpcomm::transport
