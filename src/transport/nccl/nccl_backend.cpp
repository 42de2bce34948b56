// NCCL calls behind the backend interface: set-up in two voted steps (load, then the
// communicator from a unique id that rank 0 draws and the bootstrap broadcasts).
#include "nccl_backend.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "nccl_call_gate.hpp"
#include "nccl_composed_calls.hpp"
#include "nccl_library.hpp"
#include "nccl_ops.hpp"
#include "nccl_watchdog.hpp"
#include "tpcomm/error.hpp"
#include "transport/common/call_identity.hpp"
#include "transport/common/call_sizes.hpp"
#include "transport/cuda/device_guard.hpp"
#include "transport/cuda/device_memory.hpp"
#include "transport/cuda/driver_api.hpp"

namespace tpcomm::transport {
namespace {

class NcclBackend final : public CollectiveBackend {
 public:
  explicit NcclBackend(BackendContext context) : ctx_(std::move(context)) {}
  // Bounded (docs/gpu.md, "Teardown is bounded"): ncclCommDestroy waits for the communicator's
  // outstanding work, for ever when a call (or a graph replay, which nobody watches) is pending on
  // a dead peer. The end is clean only when every watched call completed within the timeout,
  // nothing failed, and ncclCommFinalize (non-blocking here) finished the rest within the timeout
  // too; otherwise ncclCommAbort, which does not wait. Through the gate, so the communicator is
  // destroyed or aborted once, never both (docs/gpu.md, "One thread in the communicator at a
  // time").
  ~NcclBackend() override {
    const cuda::DeviceGuard on_device(ctx_.cuda.device, std::nothrow);  // never throws here
    if (watchdog_) {
      if (!watchdog_->wait_for_pending(ctx_.timeout)) aborted_ = true;
      watchdog_.reset();
    }
    if (aborted_) gate_.request_abort("the communicator ended after a failure or a pending call");
    gate_.close([this] { finish_communicator(); });
  }

  Backend kind() const override { return Backend::kNccl; }
  int setup_steps() const override { return 2; }
  std::string setup_step_name(int step) const override {
    return step == 0 ? "nccl.load" : "nccl.init";
  }

  void run_setup_step(int step, const Deadline& deadline) override {
    if (step == 0) {
      lib_ = &nccl_library();
      return;
    }
    ncclUniqueId id{};
    if (ctx_.rank == 0) check(lib_->get_unique_id(&id), "ncclGetUniqueId");
    Bytes mine(reinterpret_cast<const std::uint8_t*>(&id),
               reinterpret_cast<const std::uint8_t*>(&id) + sizeof(id));
    Bytes got = ctx_.bootstrap->broadcast(mine, 0, "nccl unique id", deadline);
    if (got.size() != sizeof(id)) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("nccl unique id: {} bytes, expected {}", got.size(), sizeof(id)));
    }
    std::memcpy(&id, got.data(), sizeof(id));
    // The caller's current device comes back after the init (docs/gpu-graphs.md, "The caller's
    // current device").
    const cuda::DeviceGuard on_device(ctx_.cuda.device);
    init_communicator(id, deadline);
    watchdog_ = std::make_unique<NcclWatchdog>(*lib_, comm_, gate_, ctx_.cuda.device, ctx_.timeout);
  }

  void run(const Call& c) override {
    // Composed calls (nccl_composed_calls.hpp): their stages come back here.
    if (c.op == Op::kAllReduceRmsNorm || c.ordered) {
      const cuda::DeviceGuard on_device(ctx_.cuda.device);
      const RunStage stage = [this](const Call& s) { run(s); };
      if (c.op == Op::kAllReduceRmsNorm) return run_unfused_rmsnorm(c, sums_, stage);
      return run_rank_ordered(c, ctx_.rank, ctx_.size, gathered_, stage);
    }
    // The communicator's device for the call and the watchdog's event (recorded on the call's
    // stream, it must be made on that stream's device, else the call goes unwatched); the
    // caller's current device comes back.
    const cuda::DeviceGuard on_device(ctx_.cuda.device);
    auto stream = static_cast<cudaStream_t>(c.stream);
    {
      // Inside the gate: an abort from another thread waits for this call to leave.
      NcclCallGate::Call inside(gate_, "the NCCL call");
      const ncclResult_t r = enqueue(c, stream);
      if (r == ncclInProgress) {
        wait_ready(Deadline::after(ctx_.timeout), "enqueueing the call");
      } else {
        check(r, "the NCCL call");
      }
    }
    if (gate_.abort_requested()) {
      throw Error(ErrorCode::kAborted,
                  fmt::format("the NCCL call was enqueued as the communicator was aborted ({}); "
                              "ncclCommAbort ended its kernels",
                              gate_.abort_reason()));
    }
    // A captured call's completion is the graph's: replays are the user's launches, unseen
    // here, so they are not watched (docs/gpu.md, "Graph-captured NCCL calls are not bounded"). An
    // eager one is, to the deadline.
    if (watchdog_ && !c.captured) watchdog_->watch(stream, identity_of(c));
  }

  // A message is enqueued on its stream at once, and complete when the stream gets there, as
  // NCCL's own: two ranks that both send first on one stream each wait for the other (NCCL's
  // rule: pair them in Communicator::send_recv, one group).
  std::uint64_t start(const PeerMessage& m) override {
    if (m.peer < 0) throw invalid_input("nccl: NCCL has no receive from any rank; name the sender");
    run(Call{.op = Op::kSendRecv,
             .input = m.send ? m.buffer : nullptr,
             .output = m.send ? nullptr : m.buffer,
             .count = m.count,
             .type = m.type,
             .root = m.peer,
             .sends = m.send,
             .sequence = m.sequence,
             .stream = m.stream});
    return 0;
  }
  int wait(std::uint64_t, const Deadline&) override { return -1; }

  // From any thread: NCCL's kernels are ended (the user's stream wait returns), at once or when
  // the call inside NCCL leaves (the gate).
  void abort() override {
    aborted_ = true;
    if (watchdog_) {
      watchdog_->abort("the communicator was aborted");
    } else {
      gate_.request_abort("the communicator was aborted");
    }
  }

  std::optional<std::string> take_async_failure() override {
    if (!watchdog_) return std::nullopt;
    if (auto failure = watchdog_->take_failure()) {
      aborted_ = true;
      return failure;
    }
    return std::nullopt;
  }

 private:
  void finish_communicator() {
    if (comm_ == nullptr) return;
    ncclResult_t state = lib_->comm_finalize(comm_);
    const Deadline deadline = Deadline::after(ctx_.timeout);
    while (state == ncclInProgress && !deadline.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (lib_->comm_get_async_error(comm_, &state) != ncclSuccess) state = ncclSystemError;
    }
    if (state == ncclSuccess) {
      lib_->comm_destroy(comm_);
    } else {
      lib_->comm_abort(comm_);
    }
  }

  void check(ncclResult_t r, const char* what) const {
    if (r == ncclSuccess) return;
    throw Error(r == ncclInvalidArgument || r == ncclInvalidUsage ? ErrorCode::kInvalidInput
                                                                  : ErrorCode::kUnavailable,
                fmt::format("{} failed: {} (NCCL {})", what, lib_->get_error_string(r),
                            nccl_version_text(lib_->version)));
  }

  ncclResult_t enqueue(const Call& c, cudaStream_t stream) {
    if (per_rank_counts(c)) return enqueue_per_rank(c, stream);
    switch (c.op) {
      case Op::kAllReduce:
        return lib_->all_reduce(c.input, c.output, c.count, nccl_type(c.type),
                                nccl_op(c.reduce, ctx_.size), comm_, stream);
      case Op::kAllGather:
        return lib_->all_gather(c.input, c.output, c.count, nccl_type(c.type), comm_, stream);
      case Op::kReduceScatter:
        return lib_->reduce_scatter(c.input, c.output, c.count, nccl_type(c.type),
                                    nccl_op(c.reduce, ctx_.size), comm_, stream);
      case Op::kReduce:
        return lib_->reduce(c.input, c.output, c.count, nccl_type(c.type),
                            nccl_op(c.reduce, ctx_.size), c.root, comm_, stream);
      case Op::kAllToAll:
      case Op::kGather:
      case Op::kScatter:
        return enqueue_point_to_point(c, stream);
      case Op::kSendRecv:
        return c.sends ? lib_->send(c.input, c.count, nccl_type(c.type), c.root, comm_, stream)
                       : lib_->recv(c.output, c.count, nccl_type(c.type), c.root, comm_, stream);
      case Op::kAllReduceRmsNorm:  // unfused: the dispatch runs its all-reduce (fuses_rmsnorm)
        break;
    }
    throw Error(ErrorCode::kInternal,
                fmt::format("nccl: no NCCL call for op {}", static_cast<int>(c.op)));
  }

  // all_gatherv: this rank's block sent to every rank and each rank's received, in one group;
  // reduce_scatterv: one ncclReduce per block, rooted at its rank, in one group.
  ncclResult_t enqueue_per_rank(const Call& c, cudaStream_t stream) {
    const std::size_t es = size_of(c.type);
    const ncclDataType_t type = nccl_type(c.type);
    const auto* in = static_cast<const std::uint8_t*>(c.input);
    auto* out = static_cast<std::uint8_t*>(c.output);
    const auto me = static_cast<std::size_t>(ctx_.rank);
    ncclResult_t r = lib_->group_start();
    std::size_t at = 0;
    for (int peer = 0; peer < ctx_.size && r == ncclSuccess; ++peer) {
      const std::size_t n = c.recv_counts[static_cast<std::size_t>(peer)];
      if (c.op == Op::kReduceScatter) {
        if (n > 0) {
          r = lib_->reduce(in + at * es, peer == ctx_.rank ? c.output : nullptr, n, type,
                           nccl_op(c.reduce, ctx_.size), peer, comm_, stream);
        }
      } else {
        if (c.recv_counts[me] > 0)
          r = lib_->send(c.input, c.recv_counts[me], type, peer, comm_, stream);
        if (n > 0 && r == ncclSuccess) r = lib_->recv(out + at * es, n, type, peer, comm_, stream);
      }
      at += n;
    }
    const ncclResult_t end = lib_->group_end();
    return r != ncclSuccess ? r : end;
  }

  // NCCL has no all-to-all, gather or scatter of its own: they are its sends and receives in one
  // group, block r to or from rank r, this rank's own block included (NCCL copies a send to
  // itself), as PyTorch's ProcessGroupNCCL makes them.
  ncclResult_t enqueue_point_to_point(const Call& c, cudaStream_t stream) {
    const std::size_t es = size_of(c.type);
    const ncclDataType_t type = nccl_type(c.type);
    const auto* in = static_cast<const std::uint8_t*>(c.input);
    auto* out = static_cast<std::uint8_t*>(c.output);
    const bool root = ctx_.rank == c.root;
    ncclResult_t r = lib_->group_start();
    std::size_t sent = 0;
    std::size_t received = 0;
    for (int peer = 0; peer < ctx_.size && r == ncclSuccess; ++peer) {
      const auto p = static_cast<std::size_t>(peer);
      std::size_t to = 0;  // elements this rank sends to `peer`, and receives from it
      std::size_t from = 0;
      if (c.op == Op::kAllToAll) {
        to = c.send_counts != nullptr ? c.send_counts[p] : c.count;
        from = c.recv_counts != nullptr ? c.recv_counts[p] : c.count;
      } else if (c.op == Op::kGather) {
        to = peer == c.root ? c.count : 0;
        from = root ? c.count : 0;
      } else {
        to = root ? c.count : 0;
        from = peer == c.root ? c.count : 0;
      }
      if (to > 0) {
        r = lib_->send(c.op == Op::kGather ? in : in + sent * es, to, type, peer, comm_, stream);
      }
      if (from > 0 && r == ncclSuccess) {
        r = lib_->recv(c.op == Op::kScatter ? out : out + received * es, from, type, peer, comm_,
                       stream);
      }
      sent += to;
      received += from;
    }
    const ncclResult_t end = lib_->group_end();
    return r != ncclSuccess ? r : end;
  }

  // Non-blocking, inside the gate: an abort requested meanwhile ends the wait (wait_ready) and
  // runs when the init leaves. A communicator that failed to start is aborted, not destroyed.
  void init_communicator(const ncclUniqueId& id, const Deadline& deadline) {
    try {
      NcclCallGate::Call inside(gate_, "ncclCommInitRankConfig");
      ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
      cfg.blocking = 0;  // so that we can give up at our deadline
      ncclResult_t r = lib_->comm_init_rank_config(&comm_, ctx_.size, id, ctx_.rank, &cfg);
      if (r != ncclSuccess && r != ncclInProgress) check(r, "ncclCommInitRankConfig");
      wait_ready(deadline, "ncclCommInitRankConfig");
    } catch (...) {
      aborted_ = true;
      throw;
    }
  }

  // Polls a non-blocking communicator (inside the gate) until it is ready, failing (and
  // aborting it) at the deadline, or at once when an abort is requested: the abort waits for
  // this call to leave the gate.
  void wait_ready(const Deadline& deadline, const char* what) {
    while (true) {
      if (gate_.abort_requested()) {
        throw Error(ErrorCode::kAborted,
                    fmt::format("{} stopped waiting: the communicator is being aborted ({})", what,
                                gate_.abort_reason()));
      }
      ncclResult_t state = ncclInProgress;
      check(lib_->comm_get_async_error(comm_, &state), "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) check(state, what);
      if (deadline.expired()) {
        aborted_ = true;
        throw Error(ErrorCode::kTimeout, fmt::format("{} did not complete within {} ms (a rank "
                                                     "missing or stuck)",
                                                     what, deadline.budget().count()));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  BackendContext ctx_;
  const NcclLibrary* lib_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::atomic<bool> aborted_{false};
  // Every NCCL call on comm_ enters it; every ncclCommAbort runs through it, once.
  NcclCallGate gate_{[this] {
    if (comm_ != nullptr) lib_->comm_abort(comm_);
  }};
  std::unique_ptr<NcclWatchdog> watchdog_;
  // The composed calls' device scratch (nccl_composed_calls.hpp): all_reduce_rmsnorm's fp32 sums
  // and deterministic mode's gathered inputs.
  GraphSafeScratch sums_{
      [device = ctx_.cuda.device](std::size_t bytes) { return cuda::device_alloc(bytes, device); }};
  GraphSafeScratch gathered_{
      [device = ctx_.cuda.device](std::size_t bytes) { return cuda::device_alloc(bytes, device); }};
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_nccl_backend(const BackendContext& context) {
  return std::make_unique<NcclBackend>(context);
}

}  // namespace tpcomm::transport
