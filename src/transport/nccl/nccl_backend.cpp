// NCCL calls behind the backend interface: set-up in two voted steps (load, then the
// communicator from a unique id that rank 0 draws and the bootstrap broadcasts).
#include "nccl_backend.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "nccl_library.hpp"
#include "nccl_ops.hpp"
#include "nccl_watchdog.hpp"
#include "tpcomm/error.hpp"
#include "transport/common/call_identity.hpp"

namespace tpcomm::transport {
namespace {

class NcclBackend final : public CollectiveBackend {
 public:
  explicit NcclBackend(BackendContext context) : ctx_(std::move(context)) {}
  ~NcclBackend() override {
    const bool comm_aborted = watchdog_ && watchdog_->comm_aborted();
    watchdog_.reset();
    if (comm_ != nullptr && !comm_aborted) {
      // After an abort the communicator may be unusable; abort frees it without waiting.
      if (aborted_) {
        lib_->comm_abort(comm_);
      } else {
        lib_->comm_destroy(comm_);
      }
    }
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
    if (cudaSetDevice(ctx_.cuda_device) != cudaSuccess) {
      throw Error(
          ErrorCode::kUnavailable,
          fmt::format("cudaSetDevice({}) failed before ncclCommInitRank", ctx_.cuda_device));
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;  // so that we can give up at our deadline
    ncclResult_t r = lib_->comm_init_rank_config(&comm_, ctx_.size, id, ctx_.rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) check(r, "ncclCommInitRankConfig");
    wait_ready(deadline, "ncclCommInitRankConfig");
    watchdog_ = std::make_unique<NcclWatchdog>(*lib_, comm_, ctx_.cuda_device, ctx_.timeout);
  }

  void run(const Call& c) override {
    auto stream = static_cast<cudaStream_t>(c.stream);
    ncclResult_t r = ncclSuccess;
    switch (c.op) {
      case Op::kAllReduce:
        r = lib_->all_reduce(c.input, c.output, c.count, nccl_type(c.type),
                             nccl_op(c.reduce, ctx_.size), comm_, stream);
        break;
      case Op::kAllGather:
        r = lib_->all_gather(c.input, c.output, c.count, nccl_type(c.type), comm_, stream);
        break;
      case Op::kReduceScatter:
        r = lib_->reduce_scatter(c.input, c.output, c.count, nccl_type(c.type),
                                 nccl_op(c.reduce, ctx_.size), comm_, stream);
        break;
    }
    if (r == ncclInProgress) {
      wait_ready(Deadline::after(ctx_.timeout), "enqueueing the call");
    } else {
      check(r, "the NCCL call");
    }
    // A captured call's completion is the graph's; an eager one is watched to the deadline.
    if (watchdog_ && !c.captured) watchdog_->watch(stream, identity_of(c));
  }

  // From any thread: the watchdog ends NCCL's kernels (the user's stream wait returns).
  void abort() override {
    aborted_ = true;
    if (watchdog_) watchdog_->abort("the communicator was aborted");
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
  void check(ncclResult_t r, const char* what) const {
    if (r == ncclSuccess) return;
    throw Error(r == ncclInvalidArgument || r == ncclInvalidUsage ? ErrorCode::kInvalidInput
                                                                  : ErrorCode::kUnavailable,
                fmt::format("{} failed: {} (NCCL {})", what, lib_->get_error_string(r),
                            nccl_version_text(lib_->version)));
  }

  // Polls a non-blocking communicator until it is ready, failing (and aborting it) at the
  // deadline.
  void wait_ready(const Deadline& deadline, const char* what) {
    while (true) {
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
  std::unique_ptr<NcclWatchdog> watchdog_;
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_nccl_backend(const BackendContext& context) {
  return std::make_unique<NcclBackend>(context);
}

}  // namespace tpcomm::transport
