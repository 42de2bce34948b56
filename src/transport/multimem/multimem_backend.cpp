// Set-up and calls of the multimem backend (multimem_backend.hpp).
#include "multimem_backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "multicast_object.hpp"
#include "tpcomm/error.hpp"
#include "transport/cuda/chunked_launch.hpp"
#include "transport/cuda/device_guard.hpp"
#include "transport/cuda/driver_api.hpp"
#include "transport/cuda/fd_channel.hpp"
#include "transport/cuda/group_failure.hpp"
#include "transport/cuda/kernel_failure_text.hpp"
#include "transport/cuda/kernel_names.hpp"
#include "transport/cuda/kernel_watchdog.hpp"
#include "transport/cuda/teardown_barrier.hpp"
#include "transport/cuda/vmm_workspace.hpp"

namespace tpcomm::transport {
namespace {

// Each of the two data areas per rank; larger calls run in steps of this size.
constexpr std::size_t kAreaBytes = 8u << 20;

using cuda::KernelOp;
using cuda::MultimemArgs;
using cuda::MultimemMode;

// The multimem backend's Unix sockets: a channel of its own beside the custom backend's.
constexpr std::uint64_t kChannelSalt = 0x6d756c74696d656dULL;  // "multimem"

class MultimemBackend final : public CollectiveBackend {
 public:
  explicit MultimemBackend(BackendContext context) : ctx_(std::move(context)) {}
  // A kernel of ours still waiting (for a dead peer, or one that never calls) would outlive the
  // memory it waits on: the abort word ends it, and the device is drained before the workspace
  // goes. Then the ranks meet before the multicast object is unbound and released
  // (docs/gpu-graphs.md, "Multimem teardown meets the peers"; teardown_barrier.hpp), unless the
  // communicator was aborted. All of it, the members' destructors included, on this communicator's
  // device; the caller's comes back after (docs/gpu-graphs.md, "The caller's current device").
  ~MultimemBackend() override {
    if (!watchdog_.created()) return;
    watchdog_.abort();
    teardown_device_.enter(ctx_.cuda.device);
    cuda::tear_down_multicast({
        .drain =
            [&] {
              if (teardown_device_.current()) cudaDeviceSynchronize();
            },
        // Only a backend every rank set up (the vote passed every step) meets: a rank whose
        // set-up failed has no multicast traffic to wait for, and its peers tear down without
        // it. After an abort peers may be dead: the wait would only delay the end.
        .meet =
            [&] {
              return cuda::meet_before_teardown(*ctx_.bootstrap, aborted_.load() || !set_up_,
                                                std::min(ctx_.timeout, kMeetLimit),
                                                "multimem teardown");
            },
        .release = [&] { multicast_.release(); },
    });
    if (abort_stream_ != nullptr) cudaStreamDestroy(abort_stream_);
    cudaGetLastError();
  }

  Backend kind() const override { return Backend::kMultimem; }
  int setup_steps() const override { return 4; }
  std::string setup_step_name(int step) const override {
    static const char* names[] = {"multimem.workspace", "multimem.share", "multimem.bind",
                                  "multimem.probe"};
    return names[step];
  }

  void run_setup_step(int step, const Deadline& deadline) override {
    if (step == 0) return create(deadline);
    // The caller's current device comes back after each step.
    const cuda::DeviceGuard on_device(ctx_.cuda.device);
    if (step == 1) return share(deadline);
    if (step == 2) return bind();
    probe(deadline);
  }

  void setup_complete() override {
    set_up_ = true;
    listener_.reset();
    watchdog_.start(ctx_.on_async_failure);
  }

  void run(const Call& c) override {
    const cuda::DeviceGuard on_device(ctx_.cuda.device);
    const std::size_t es = size_of(c.type);
    const bool rs = c.op == Op::kReduceScatter;
    MultimemArgs a = base_;
    a.in_graph = c.captured ? 1 : 0;
    a.type = static_cast<int>(c.type);
    a.reduce = static_cast<int>(c.reduce);
    a.blocks = cuda::blocks_for(std::clamp(c.blocks > 0 ? c.blocks : 16, 1, cuda::kMaxBlocks),
                                c.count * es);
    a.op = c.op == Op::kAllGather ? KernelOp::kAllGather
           : rs                   ? KernelOp::kReduceScatter
                                  : KernelOp::kOneShot;
    // The switch only adds; max, min and avg gather and reduce in rank order instead.
    a.mode = c.op != Op::kAllGather && c.reduce == ReduceOp::kSum ? MultimemMode::kReduceSum
                                                                  : MultimemMode::kGather;
    const std::size_t per_chunk =
        cuda::multimem_chunk_elements(a.layout.area_bytes, es, ctx_.size, rs, a.mode);
    cuda::launch_in_chunks(c, per_chunk, a, cuda::launch_multimem_kernel,
                           "launching the multimem kernel");
  }

  // The group's failure word first, then this rank's abort word (the order the signalling model
  // requires, docs/gpu-kernels.md "The signalling protocol, checked"). Unless the group failed
  // already, one thread adds the word into every rank's copy through the multicast mapping: a
  // kernel of one thread fits beside this rank's own waiting kernel (at most kMaxBlocks = 64
  // blocks, fewer than the SMs of any GPU with multicast), so it is waited for before the abort
  // word is set.
  void abort() override {
    aborted_ = true;
    publish_abort_to_group();
    watchdog_.abort();
  }
  std::optional<std::string> take_async_failure() override { return watchdog_.take_failure(); }

 private:
  void publish_abort_to_group() {
    if (abort_stream_ == nullptr || base_.multicast == nullptr) return;
    const std::uint64_t value = cuda::group_failure_value(2, ctx_.rank);
    auto* own = reinterpret_cast<std::uint64_t*>(base_.unicast + base_.layout.failed_offset);
    // Only the multicast add writes it (a copy written from the host too would be added to), so
    // the host step only reads this rank's copy: a group that failed already keeps its cause.
    if (!cuda::publish_group_failure(ctx_.cuda.device, own, {}, value, abort_stream_)) return;
    const cuda::DeviceGuard on_device(ctx_.cuda.device, std::nothrow);  // abort() never throws
    if (cuda::launch_multimem_publish_failure(base_.multicast + base_.layout.failed_offset, value,
                                              abort_stream_) == 0) {
      cuda::finished_within_a_second(abort_stream_);
    }
    cudaGetLastError();
  }

  std::uint64_t channel() const { return ctx_.comm_id ^ kChannelSalt; }

  void create(const Deadline&) {
    if (std::string why = cuda::MulticastObject::unsupported_reason(ctx_.cuda.device);
        !why.empty()) {
      throw Error(ErrorCode::kUnavailable, why);
    }
    const cuda::DeviceGuard on_device(ctx_.cuda.device);
    // Sized once with the VMM granularity, then again so the multicast granularity divides it.
    const auto sharing = ctx_.spans_nodes() ? cuda::VmmWorkspace::Sharing::kFabric
                                            : cuda::VmmWorkspace::Sharing::kPosixFd;
    const std::size_t vmm_granularity = cuda::VmmWorkspace::granularity(ctx_.cuda.device, sharing);
    auto layout = cuda::multimem_layout(kAreaBytes, vmm_granularity);
    const std::size_t mc_granularity =
        cuda::MulticastObject::granularity(ctx_.size, layout.total_bytes, ctx_.spans_nodes());
    layout = cuda::multimem_layout(kAreaBytes, std::max(vmm_granularity, mc_granularity));
    workspace_.create(ctx_.cuda.device, layout.total_bytes, sharing);
    watchdog_.create("multimem kernel",
                     cuda::kernel_wait_budget(ctx_.timeout, ctx_.cuda.kernel_timeout));
    cuda::check_cuda(cudaStreamCreateWithFlags(&abort_stream_, cudaStreamNonBlocking),
                     "cudaStreamCreateWithFlags (abort stream)");
    if (ctx_.rank == 0) multicast_.create(ctx_.size, layout.total_bytes, ctx_.spans_nodes());
    base_.rank = ctx_.rank;
    base_.world = ctx_.size;
    base_.layout = layout;
    base_.unicast = static_cast<char*>(workspace_.own());
    base_.abort_word = watchdog_.device_abort_word();
    base_.failure = watchdog_.device_failure();
    base_.wait_budget_ns = watchdog_.wait_budget_ns();
    if (!ctx_.spans_nodes()) {
      cuda::FdListener listener = cuda::listen_fd_channel(channel(), ctx_.rank);
      listener_ = std::move(listener.socket);
      listener_name_ = std::move(listener.name);
    }
  }

  void share(const Deadline& deadline) {
    if (ctx_.spans_nodes()) {
      Bytes handle;
      if (ctx_.rank == 0) {
        const CUmemFabricHandle h = multicast_.export_fabric();
        handle.assign(reinterpret_cast<const std::uint8_t*>(&h),
                      reinterpret_cast<const std::uint8_t*>(&h) + sizeof(h));
      }
      handle = ctx_.bootstrap->broadcast(handle, 0, "multimem fabric handle", deadline);
      if (handle.size() != sizeof(CUmemFabricHandle)) {
        throw Error(ErrorCode::kMismatch,
                    fmt::format("rank 0 sent a {}-byte multicast fabric handle", handle.size()));
      }
      if (ctx_.rank != 0) {
        CUmemFabricHandle h;
        std::memcpy(&h, handle.data(), sizeof(h));
        multicast_.import(h, base_.layout.total_bytes);
      }
      multicast_.add_device(ctx_.cuda.device);
      return;
    }
    net::Fd mine = ctx_.rank == 0 ? multicast_.export_fd() : net::Fd();
    const cuda::FdChannelAuth auth =
        cuda::agree_fd_channel(*ctx_.bootstrap, channel(), listener_name_, deadline);
    net::Fd got = cuda::broadcast_handle(auth, 0, listener_.get(), mine.get(),
                                         base_.layout.total_bytes, deadline);
    if (ctx_.rank != 0) multicast_.import(got.get(), base_.layout.total_bytes);
    multicast_.add_device(ctx_.cuda.device);
  }

  void bind() {
    base_.multicast = static_cast<char*>(multicast_.bind_and_map(workspace_.handle()));
  }

  // Every rank puts four copies of rank + 1 into its probe area; one multicast load must then
  // read their sum on every rank (a multicast that does not reach every workspace fails here).
  void probe(const Deadline& deadline) {
    const float mine[4] = {static_cast<float>(ctx_.rank + 1), static_cast<float>(ctx_.rank + 1),
                           static_cast<float>(ctx_.rank + 1), static_cast<float>(ctx_.rank + 1)};
    char* probe_in = base_.unicast + base_.layout.probe_offset;
    cuda::check_cuda(cudaMemcpy(probe_in, mine, sizeof(mine), cudaMemcpyHostToDevice),
                     "writing the multimem probe");
    // A pageable copy may return before the device has the bytes: the peers read them next.
    cuda::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (multimem probe)");
    ctx_.bootstrap->barrier("multimem probe", deadline);
    void* result = nullptr;
    cuda::check_cuda(cudaMalloc(&result, sizeof(mine)), "cudaMalloc (multimem probe)");
    const int launched =
        cuda::launch_multimem_probe(base_.multicast + base_.layout.probe_offset, result, nullptr);
    float got[4] = {};
    const int synced = launched == 0 ? cudaDeviceSynchronize() : launched;
    if (synced == 0) cudaMemcpy(got, result, sizeof(got), cudaMemcpyDeviceToHost);
    cudaFree(result);
    cuda::check_cuda(synced, "the multimem probe kernel");
    ctx_.bootstrap->barrier("multimem probe done", deadline);
    const float want = static_cast<float>(ctx_.size) * static_cast<float>(ctx_.size + 1) / 2.0f;
    for (float g : got) {
      if (g != want) {
        throw Error(ErrorCode::kUnavailable,
                    fmt::format("multimem probe: a multicast sum of {} ranks read {}, expected {}; "
                                "the multicast object does not reach every workspace",
                                ctx_.size, g, want));
      }
    }
  }

  // First, so destroyed last: entered by the destructor, it keeps this device current while the
  // other members go, and gives the caller's back after them.
  cuda::DeviceGuard teardown_device_;
  BackendContext ctx_;
  cuda::VmmWorkspace workspace_;
  cuda::MulticastObject multicast_;  // after workspace_: unbound before the memory goes
  cuda::KernelWatchdog watchdog_;
  net::Fd listener_;
  std::string listener_name_;
  MultimemArgs base_;
  bool set_up_ = false;               // every set-up step passed on every rank
  std::atomic<bool> aborted_{false};  // abort() ran: no teardown barrier (peers may be dead)
  // The teardown barrier's limit: a peer that closes later than this is not waited for.
  static constexpr std::chrono::milliseconds kMeetLimit{10000};
  cudaStream_t abort_stream_ = nullptr;  // abort()'s writes, beside a kernel that waits
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_multimem_backend(const BackendContext& context) {
  if (context.size < 2 || context.size > cuda::kMaxRanks) {
    throw invalid_input(
        fmt::format("multimem backend: {} ranks, expected 2 to {}", context.size, cuda::kMaxRanks));
  }
  return std::make_unique<MultimemBackend>(context);
}

}  // namespace tpcomm::transport
