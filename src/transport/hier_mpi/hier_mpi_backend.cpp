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
#include "transport/common/call_sizes.hpp"

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

// MPI's counts and displacements of a call with per-rank blocks (all_to_all(v), all_gatherv,
// reduce_scatterv), in MPI's units; empty for the others.
struct BlockArgs {
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
};

// What one call's requests read and write. Owned by the lane, not by the caller: a request given
// up on may still be written by MPI later, so its buffers must never be freed or reused.
struct CallBuffers {
  CallIdentity mine;
  std::vector<CallIdentity> all;
  std::vector<std::uint8_t> input, output;
  BlockArgs blocks;
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
    DataArgs args = data_args(c);
    const Deadline deadline = Deadline::after(ctx_.timeout);
    auto b = std::make_unique<CallBuffers>();
    b->mine = identity_of(c);
    b->all.resize(static_cast<std::size_t>(ctx_.size));
    void* ids = nullptr;
    check_started(world_.api->iallgather(comm_, &b->mine, b->all.data(), sizeof(CallIdentity),
                                         TPCOMM_MPI_BYTE, &ids),
                  b, "MPI_Iallgather of the calls' identities");
    void* data = start_data(c, args, b);
    wait_for(ids, deadline, b, "the comparison with its peers");
    for (int r = 0; r < ctx_.size; ++r) {
      if (b->all[static_cast<std::size_t>(r)] == b->mine) continue;
      const std::string why =
          fmt::format("mismatched call: lane rank {} called {} while this rank called {}", r,
                      describe(b->all[static_cast<std::size_t>(r)]), describe(b->mine));
      give_up(std::move(b), why);
      throw Error(ErrorCode::kMismatch, "MPI lane: " + why);
    }
    wait_for(data, deadline, b, "the data");
    if (!b->output.empty()) std::memcpy(c.output, b->output.data(), b->output.size());
  }

 private:
  // The data collective's arguments, checked before anything starts: reductions count
  // elements of the stage type, every other op bytes.
  struct DataArgs {
    int count = 0;
    int type = TPCOMM_MPI_BYTE;
    int op = TPCOMM_MPI_SUM;
    BlockArgs blocks;
  };
  DataArgs data_args(const Call& c) const {
    const bool reducing = reduces(c.op);
    const std::size_t unit = reducing ? 1 : size_of(c.type);
    const char* what = reducing ? "elements" : "bytes";
    DataArgs a;
    if (reducing) {
      a.type = mpi_type(c.type);
      a.op = mpi_op(c.reduce);
    }
    const auto w = static_cast<std::size_t>(ctx_.size);
    // MPI's displacements are ints too: every block's end must fit.
    auto blocks = [&](auto count_of, std::vector<int>& counts, std::vector<int>& displs) {
      std::size_t at = 0;
      for (std::size_t r = 0; r < w; ++r) {
        counts.push_back(mpi_count(count_of(r) * unit, what));
        displs.push_back(mpi_count(at, what));
        at += count_of(r) * unit;
      }
      mpi_count(at, what);
    };
    const auto rank = static_cast<std::size_t>(ctx_.rank);
    if (c.op == Op::kAllToAll) {
      blocks([&](std::size_t r) { return c.send_counts ? c.send_counts[r] : c.count; },
             a.blocks.send_counts, a.blocks.send_displs);
      blocks([&](std::size_t r) { return c.recv_counts ? c.recv_counts[r] : c.count; },
             a.blocks.recv_counts, a.blocks.recv_displs);
    } else if (per_rank_counts(c)) {
      blocks([&](std::size_t r) { return c.recv_counts[r]; }, a.blocks.recv_counts,
             a.blocks.recv_displs);
      a.count = a.blocks.recv_counts[rank];
    } else {
      a.count = mpi_count(c.count * unit, what);
    }
    return a;
  }

  // The call's data collective, on the lane's own copy of its input.
  void* start_data(const Call& c, DataArgs& a, std::unique_ptr<CallBuffers>& buffers) {
    CallBuffers& b = *buffers;
    const std::size_t es = size_of(c.type);
    const auto* in = static_cast<const std::uint8_t*>(c.input);
    b.input.assign(in, in + input_elements(c, ctx_.rank, ctx_.size) * es);
    b.output.resize(output_elements(c, ctx_.rank, ctx_.size) * es);
    b.blocks = std::move(a.blocks);
    const BlockArgs& k = b.blocks;
    const TpcommMpiApi& mpi = *world_.api;
    void* i = b.input.data();
    void* o = b.output.data();
    void* request = nullptr;
    int rc = 0;
    switch (c.op) {
      case Op::kAllGather:
        rc = per_rank_counts(c) ? mpi.iallgatherv(comm_, i, a.count, o, k.recv_counts.data(),
                                                  k.recv_displs.data(), a.type, &request)
                                : mpi.iallgather(comm_, i, o, a.count, a.type, &request);
        break;
      case Op::kReduceScatter:
        rc = per_rank_counts(c)
                 ? mpi.ireduce_scatter(comm_, i, o, k.recv_counts.data(), a.type, a.op, &request)
                 : mpi.ireduce_scatter_block(comm_, i, o, a.count, a.type, a.op, &request);
        break;
      case Op::kAllToAll:
        rc = mpi.ialltoallv(comm_, i, k.send_counts.data(), k.send_displs.data(), o,
                            k.recv_counts.data(), k.recv_displs.data(), a.type, &request);
        break;
      case Op::kReduce:
        rc = mpi.ireduce(comm_, i, o, a.count, a.type, a.op, c.root, &request);
        break;
      case Op::kGather:
        rc = mpi.igather(comm_, i, o, a.count, a.type, c.root, &request);
        break;
      case Op::kScatter:
        rc = mpi.iscatter(comm_, i, o, a.count, a.type, c.root, &request);
        break;
      default:
        rc = mpi.iallreduce(comm_, i, o, a.count, a.type, a.op, &request);
    }
    check_started(rc, buffers, "starting the lane's collective");
    return request;
  }

  // A request that did not start; one started before it (the identities) keeps the buffers.
  void check_started(int rc, std::unique_ptr<CallBuffers>& b, const char* what) {
    if (rc == 0) return;
    const std::string why = fmt::format("{} failed with MPI error {}", what, rc);
    give_up(std::move(b), why);
    throw Error(ErrorCode::kUnavailable, "MPI lane: " + why);
  }

  // Polls `request` until it completes, the deadline passes or the lane is aborted.
  // `stage`: which of the call's requests ("the data"), for messages.
  void wait_for(void* request, const Deadline& deadline, std::unique_ptr<CallBuffers>& b,
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
