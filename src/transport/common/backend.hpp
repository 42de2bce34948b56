// The interface every backend implements (one folder each under src/transport/), and the
// arguments of one call. The communicator owns the order of set-up steps and votes after each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tpcomm/deadline.hpp"
#include "tpcomm/rmsnorm.hpp"
#include "tpcomm/stage_time.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::transport {

struct Call {
  Op op = Op::kAllReduce;
  const void* input = nullptr;
  void* output = nullptr;
  // all_reduce, reduce: elements; all_gather, reduce_scatter, all_to_all, gather, scatter: per
  // rank (call_sizes.hpp has every buffer's size)
  std::size_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp reduce = ReduceOp::kSum;
  int root = 0;  // gather, scatter, reduce: the rank with the whole data
  // all_to_allv: the elements this rank sends to and receives from each rank (size() each; the
  // blocks lie in rank order, back to back); null for all_to_all, whose blocks hold `count`.
  const std::size_t* send_counts = nullptr;
  // all_gatherv and reduce_scatterv: `recv_counts` holds every rank's block (the same on every
  // rank), `count` their sum, and this digest of them is compared across ranks (never 0 or 1).
  const std::size_t* recv_counts = nullptr;
  std::uint32_t counts_digest = 0;
  bool sends = false;  // send_recv on a backend that runs it as a call (NCCL): `root` is the peer
  Algorithm algorithm = Algorithm::kOneShot;
  std::uint64_t sequence = 0;
  int blocks = 0;                // the plan row's thread blocks (custom kernels)
  std::uint64_t step_bytes = 0;  // the plan row's step (shm); 0: the backend's own
  void* stream = nullptr;        // cudaStream_t of a GPU call; null for host buffers
  bool captured = false;         // the stream is capturing a CUDA graph (the graph table chose)
  // A captured all-reduce: the algorithm its replays run while its input is not registered
  // (graph_copy_algorithm.hpp); `algorithm` is the one for registered inputs.
  Algorithm unregistered_algorithm = Algorithm::kOneShot;
  // The user's call this one is a stage of (hier's stages), or null. Backends compare it across
  // ranks too: two user calls can have identical stages (1024 and 1023 elements split in two).
  const Call* outer = nullptr;
  // Communicator::barrier's one-element all-reduce: compared across ranks like the rest, so that
  // a barrier never meets a user's all-reduce of one int32.
  bool barrier = false;
  // all_reduce_rmsnorm: its rows, residual, weight and eps (`count` is rows x hidden, the sum
  // is kSum); null for every other op. Only backends that fuse it (fuses_rmsnorm) see such a
  // call: the dispatch runs the others' float32 all-reduce and the add+norm itself.
  const RmsNorm* norm = nullptr;
  // Deterministic mode on device buffers: a floating reduction the backend sums in rank order
  // 0..W-1 by gathering the raw inputs and reducing them itself (only NCCL takes such a call; the
  // dispatch sets it where takes_ordered_form says so).
  bool ordered = false;
};

// One side of a point-to-point message (Op::kSendRecv): a send of `buffer` to `peer`, or a
// receive into it from `peer`. Not collective: the two ranks alone take part.
struct PeerMessage {
  bool send = true;
  void* buffer = nullptr;  // read only by a send
  std::size_t count = 0;
  DataType type = DataType::kFloat32;
  int peer = 0;  // -1: a receive from whichever rank sends first
  int tag = 0;
  std::uint64_t sequence = 0;  // the communicator's number of this message (for errors)
  void* stream = nullptr;      // cudaStream_t of a GPU message; null for host buffers
};

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual Backend kind() const = 0;

  // Set-up: steps run in order; each throws on failure (its message is the reason).
  virtual int setup_steps() const = 0;
  virtual std::string setup_step_name(int step) const = 0;
  virtual void run_setup_step(int step, const Deadline& deadline) = 0;
  // Every rank passed every step (after the last vote): drop rendezvous state.
  virtual void setup_complete() {}

  // A call; throws tpcomm::Error on failure (the communicator adds rank, op and sequence).
  virtual void run(const Call& call) = 0;
  // Releases connections so that peers blocked on this rank fail promptly.
  virtual void abort() = 0;
  // This rank is closing the communicator normally, after its last call returned: peers that
  // wait on it, now or at their next call, fail at once saying so, while a call this rank
  // completed still completes on theirs. Backends whose peers notice a closed connection at once
  // (Gloo, NCCL) need nothing; calls on the GPU may still run, so the CUDA backends do nothing.
  virtual void announce_close() {}
  // A failure found after a call returned (a GPU kernel that gave up waiting), once; the
  // communicator aborts with it. Backends whose calls finish before returning have none.
  virtual std::optional<std::string> take_async_failure() { return std::nullopt; }
  // A collective call on every rank: shares the buffers that calls captured in CUDA graphs
  // since the last call read, so that replays read them in place. Returns how many now are.
  virtual std::size_t register_graph_buffers(const Deadline&) { return 0; }
  // Point-to-point, on the backends the plan gives send_recv: start() begins a message (a
  // receive is posted, a send may go out at once or wait for room) and returns its handle;
  // wait() returns once that message completed (its peer: a receive from any rank, peer -1,
  // learns it then), progressing every message started before it, or throws by `deadline`. Messages
  // between two ranks match in the order they were started on each side; a receive checks the
  // count, type and tag of what arrives (kMismatch).
  virtual std::uint64_t start(const PeerMessage& message);
  virtual int wait(std::uint64_t handle, const Deadline& deadline);
  // Time its calls spent in each of its stages so far (hier); none for a backend of one stage.
  virtual std::vector<StageTime> stage_times() const { return {}; }
};

}  // namespace tpcomm::transport
