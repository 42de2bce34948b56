// The MPI lane (hier_mpi_backend.hpp).
#include "hier_mpi_backend.hpp"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tpcomm/error.hpp"
#include "transport/common/call_identity.hpp"

namespace tpcomm::transport {
namespace {

// How long a wait calls MPI_Test back to back (yielding the core between tests, as Open MPI's
// mpi_yield_when_idle does) before it tests every kSlowPoll: MPI moves bytes only inside its
// calls, so a short pause between tests is what a slow peer may cost, never a fast one.
constexpr auto kBusyPolling = std::chrono::milliseconds(10);
constexpr auto kSlowPoll = std::chrono::microseconds(100);

int mpi_type(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return TPCOMM_MPI_FLOAT;
    case DataType::kInt32:
      return TPCOMM_MPI_INT32;
    case DataType::kInt64:
      return TPCOMM_MPI_INT64;
    case DataType::kUInt8:
      return TPCOMM_MPI_UINT8;
    default:
      throw Error(ErrorCode::kInternal,
                  fmt::format("the MPI lane reduces fp32 or integers, not {}", to_string(type)));
  }
}

int mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return TPCOMM_MPI_SUM;
    case ReduceOp::kMax:
      return TPCOMM_MPI_MAX;
    case ReduceOp::kMin:
      return TPCOMM_MPI_MIN;
    default:
      throw Error(ErrorCode::kInternal, "the MPI lane's caller turns avg into sum");
  }
}

// MPI counts are ints.
int mpi_count(std::size_t count, const char* unit) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw Error(ErrorCode::kInvalidInput,
                fmt::format("the MPI lane moves at most {} {} per rank in one call, not {}",
                            INT_MAX, unit, count));
  }
  return static_cast<int>(count);
}

// What one call's requests read and write. Owned by the lane, not by the caller: a request given
// up on may still be written by MPI later, so its buffers must never be freed or reused.
struct CallBuffers {
  CallIdentity mine;
  std::vector<CallIdentity> all;
  std::vector<std::uint8_t> input, output;
};

// Where the buffers of requests given up on go: reachable for as long as the process lives,
// since MPI may still write them (a lane that gave up may be destroyed before MPI finalises).
void keep_for_good(std::unique_ptr<CallBuffers> buffers) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::unique_ptr<CallBuffers>>();
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(buffers));
}

class MpiLaneBackend final : public CollectiveBackend {
 public:
  MpiLaneBackend(BackendContext ctx, control::MpiWorld world, int color, int key)
      : ctx_(std::move(ctx)), world_(std::move(world)), color_(color), key_(key) {}

  ~MpiLaneBackend() override {
    // A request given up on still refers to the communicator: it stays.
    if (comm_ != nullptr && broken_.empty()) world_.api->free_comm(comm_);
  }

  Backend kind() const override { return Backend::kHierMpi; }
  int setup_steps() const override { return 1; }
  std::string setup_step_name(int) const override { return "mpi.split"; }

  // Collective over the whole world, and blocking (MPI has no non-blocking split): the vote
  // before this step saw every rank alive, so all of them reach it.
  void run_setup_step(int, const Deadline&) override {
    int rank = -1;
    int size = 0;
    if (int rc = world_.api->split(world_.comm, color_, key_, &comm_, &rank, &size)) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("MPI_Comm_split of the lanes failed (MPI error {})", rc));
    }
    if (rank != ctx_.rank || size != ctx_.size) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("the MPI lane split from the world made this rank {} of {}, "
                              "expected {} of {}",
                              rank, size, ctx_.rank, ctx_.size));
    }
  }

  // The other ranks may be stopped or waiting for this one: MPI_Finalize is no longer safe.
  void abort() override {
    aborted_.store(true);
    control::mark_mpi_world_failed("the communicator was aborted");
  }

  void run(const Call& c) override {
    if (comm_ == nullptr) throw Error(ErrorCode::kInternal, "MPI lane used before set-up");
    if (!broken_.empty()) {
      throw Error(
          ErrorCode::kAborted,
          fmt::format("the MPI lane gave up on an earlier call ({}) and takes no more", broken_));
    }
    const DataArgs args = data_args(c);
    const Deadline deadline = Deadline::after(ctx_.timeout);
    auto b = std::make_unique<CallBuffers>();
    b->mine = identity_of(c);
    b->all.resize(static_cast<std::size_t>(ctx_.size));
    void* ids = nullptr;
    start(world_.api->iallgather(comm_, &b->mine, b->all.data(), sizeof(CallIdentity),
                                 TPCOMM_MPI_BYTE, &ids),
          b, "MPI_Iallgather of the calls' identities");
    void* data = start_data(c, args, b);
    wait(ids, deadline, b, "the comparison with its peers");
    for (int r = 0; r < ctx_.size; ++r) {
      if (b->all[static_cast<std::size_t>(r)] == b->mine) continue;
      const std::string why =
          fmt::format("mismatched call: lane rank {} called {} while this rank called {}", r,
                      describe(b->all[static_cast<std::size_t>(r)]), describe(b->mine));
      give_up(std::move(b), why);
      throw Error(ErrorCode::kMismatch, "MPI lane: " + why);
    }
    wait(data, deadline, b, "the data");
    std::memcpy(c.output, b->output.data(), b->output.size());
  }

 private:
  // The data collective's arguments, checked before anything starts.
  struct DataArgs {
    int count = 0;
    int type = TPCOMM_MPI_BYTE;
    int op = TPCOMM_MPI_SUM;
  };
  static DataArgs data_args(const Call& c) {
    if (c.op == Op::kAllGather) {
      return {mpi_count(c.count * size_of(c.type), "bytes"), TPCOMM_MPI_BYTE, TPCOMM_MPI_SUM};
    }
    return {mpi_count(c.count, "elements"), mpi_type(c.type), mpi_op(c.reduce)};
  }

  // The call's data collective, on the lane's own copy of its input.
  void* start_data(const Call& c, const DataArgs& a, std::unique_ptr<CallBuffers>& buffers) {
    CallBuffers& b = *buffers;
    const std::size_t es = size_of(c.type);
    const std::size_t n = static_cast<std::size_t>(ctx_.size);
    const std::size_t in_count = c.op == Op::kReduceScatter ? c.count * n : c.count;
    const std::size_t out_count = c.op == Op::kAllGather ? c.count * n : c.count;
    b.input.assign(static_cast<const std::uint8_t*>(c.input),
                   static_cast<const std::uint8_t*>(c.input) + in_count * es);
    b.output.resize(out_count * es);
    void* request = nullptr;
    int rc = 0;
    if (c.op == Op::kAllGather) {
      rc =
          world_.api->iallgather(comm_, b.input.data(), b.output.data(), a.count, a.type, &request);
    } else if (c.op == Op::kReduceScatter) {
      rc = world_.api->ireduce_scatter_block(comm_, b.input.data(), b.output.data(), a.count,
                                             a.type, a.op, &request);
    } else {
      rc = world_.api->iallreduce(comm_, b.input.data(), b.output.data(), a.count, a.type, a.op,
                                  &request);
    }
    start(rc, buffers, "starting the lane's collective");
    return request;
  }

  // A request that did not start; one started before it (the identities) keeps the buffers.
  void start(int rc, std::unique_ptr<CallBuffers>& b, const char* what) {
    if (rc == 0) return;
    const std::string why = fmt::format("{} failed with MPI error {}", what, rc);
    give_up(std::move(b), why);
    throw Error(ErrorCode::kUnavailable, "MPI lane: " + why);
  }

  // Polls `request` until it completes, the deadline passes or the lane is aborted.
  // `stage`: which of the call's requests ("the data"), for messages.
  void wait(void* request, const Deadline& deadline, std::unique_ptr<CallBuffers>& b,
            const char* stage) {
    const auto began = std::chrono::steady_clock::now();
    auto fail = [&](ErrorCode code, const std::string& why) {
      const std::string text = fmt::format("{} of {}", stage, describe(b->mine));
      give_up(std::move(b), why);
      return Error(code, fmt::format("MPI lane: {}: {}", text, why));
    };
    for (;;) {
      int done = 0;
      if (int rc = world_.api->test(request, &done)) {
        throw fail(ErrorCode::kUnavailable, fmt::format("MPI_Test failed with MPI error {}", rc));
      }
      if (done) return;
      if (aborted_.load()) throw fail(ErrorCode::kAborted, "the communicator was aborted");
      if (deadline.expired()) {
        throw fail(ErrorCode::kTimeout,
                   fmt::format("a rank of the lane did not take part within {} ms",
                               deadline.budget().count()));
      }
      if (std::chrono::steady_clock::now() - began < kBusyPolling) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(kSlowPoll);
      }
    }
  }

  // A request is left with MPI: its buffers stay, and so does the communicator.
  void give_up(std::unique_ptr<CallBuffers> b, const std::string& why) {
    if (broken_.empty()) broken_ = why;
    control::mark_mpi_world_failed("an MPI lane gave up on a call: " + why);
    if (b) keep_for_good(std::move(b));
  }

  BackendContext ctx_;
  control::MpiWorld world_;
  int color_ = 0;
  int key_ = 0;
  void* comm_ = nullptr;
  std::atomic<bool> aborted_{false};
  std::string broken_;  // why the lane takes no more calls; empty: it does
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_mpi_lane(const BackendContext& lane,
                                                 const control::MpiWorld& world, int color,
                                                 int key) {
  return std::make_unique<MpiLaneBackend>(lane, world, color, key);
}

}  // namespace tpcomm::transport
