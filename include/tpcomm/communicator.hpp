// The communicator: a group of ranks that agreed on a plan and runs collectives by it.
//
//   auto comm = tpcomm::Communicator::create(tpcomm::bootstrap_from_environment(deadline));
//   comm->all_reduce(in, out, count, tpcomm::DataType::kFloat32, tpcomm::ReduceOp::kSum);
//
// Creation: probe -> gather facts -> plan -> vote on the plan digest -> set up each eligible
// backend, voting after every step -> ready. Every host wait has a deadline (TPCOMM_TIMEOUT_MS);
// on a GPU, an NCCL call replayed from a CUDA graph is not watched (docs/gpu.md, "nccl").
// A failure (timeout, dead peer, mismatch) aborts the communicator: the call throws
// tpcomm::Error, and every later call throws kAborted with the original cause.
//
// Threads: calls from several threads are served one at a time, in arrival order; every rank
// must still issue the same calls in the same order. fork(): a child may neither call nor tear
// down an inherited communicator (calls throw kInvalidInput; its destruction does nothing).
//
// Buffers are host memory (or device memory with a stream, for a kCuda communicator). In place:
// all_reduce with input == output; all_gather with input == output + rank * count; reduce_scatter
// with output == input + rank * count. fp16 and bf16 are reduced in fp32 and rounded to nearest
// even. Results are bitwise identical on every rank.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tpcomm/bootstrap.hpp"
#include "tpcomm/call_stats.hpp"
#include "tpcomm/facts.hpp"
#include "tpcomm/plan.hpp"
#include "tpcomm/rmsnorm.hpp"
#include "tpcomm/stage_time.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm {

struct CommunicatorOptions {
  std::optional<std::chrono::milliseconds> timeout;  // default: TPCOMM_TIMEOUT_MS
  // Deterministic mode (docs/communicator.md, "Deterministic mode"): every reduction sums in rank
  // order 0..W-1, the same bits whatever the call's size, algorithm, chunking, thread count, ISA
  // or node layout. Default: TPCOMM_DETERMINISTIC. Part of the plan's digest.
  std::optional<bool> deterministic;
  // The size table plan() shows. A kCuda communicator plans both: calls captured in a CUDA
  // graph use the graph table, the others the eager one.
  Mode mode = Mode::kEager;
  // kCpu: host buffers (shm, hier, gloo). kCuda: device buffers on `cuda_device` (custom,
  // multimem, nccl), calls take a stream.
  DeviceType device = DeviceType::kCpu;
  int cuda_device = -1;  // -1: LOCAL_RANK modulo the visible devices
  // Backends never to use, besides TPCOMM_DISABLE's (the plan names who refused them). The
  // fallbacks, nccl and gloo, cannot be disabled: every group can use them.
  std::vector<Backend> disabled;
  // Threads that split each large shm call of this rank (kCpu; docs/communicator.md, "Threads"):
  // default TPCOMM_THREADS, whose 0 shares the rank's CPUs evenly among the ranks that may run
  // on them. 1: the calling thread alone.
  std::optional<int> threads;
  // The caller runs the calls the plan gives the fallback engine (NCCL on kCuda, Gloo on kCpu)
  // with a communicator of its own, such as an inference engine's: tpcomm does not set the
  // fallback up, and a call routed to it is refused (kInvalidInput, nothing sent) on every rank
  // alike; ask the plan (plan(mode), Python's route()) which calls are tpcomm's first.
  bool caller_serves_fallback = false;
};

namespace runtime {
struct CommunicatorState;  // the library's own (src/runtime)
}  // namespace runtime

// A cudaStream_t, without making every user of this header include CUDA's.
using CudaStream = void*;

class Communicator {
 public:
  static std::unique_ptr<Communicator> create(std::shared_ptr<Bootstrap> bootstrap,
                                              const CommunicatorOptions& options = {});
  // Closes it (close()).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  // The CUDA device (index among the visible ones) whose buffers and streams a kCuda
  // communicator's calls take: CommunicatorOptions::cuda_device, else LOCAL_RANK modulo the
  // visible devices (NCCL's ncclCommCuDevice). -1 for a kCpu communicator.
  int cuda_device() const;
  // The plan every rank agreed on, including backends refused at set-up and why.
  const Plan& plan() const;
  // The plan of one mode (a kCpu communicator has only options.mode's; the other throws).
  const Plan& plan(Mode mode) const;
  // The gathered facts of the group (what TPCOMM_DUMP_FACTS writes).
  const FactsTable& facts() const;
  // The backend and algorithm (with the row's blocks and step) that carry a call of `op` on
  // `type` whose input holds `input_bytes`, in the size table of `mode`: the same function the
  // calls are dispatched by (route_call in plan.hpp), so an engine can ask which calls tpcomm
  // serves before it makes them. Throws for a mode a kCpu communicator has no table for.
  TableRow route(Op op, std::uint64_t input_bytes, DataType type, Mode mode) const;

  // `count` elements in each buffer.
  void all_reduce(const void* input, void* output, std::size_t count, DataType type, ReduceOp op);
  // `count` elements from each rank; output holds size() * count.
  void all_gather(const void* input, void* output, std::size_t count, DataType type);
  // input holds size() * count elements; output receives this rank's `count`.
  void reduce_scatter(const void* input, void* output, std::size_t count, DataType type,
                      ReduceOp op);

  // A transformer layer's row-parallel all-reduce with the residual add and RMSNorm that follow
  // it (rmsnorm.hpp): `count` = rows x norm.hidden elements of float32, bfloat16 or float16.
  // norm.residual_out = the sum of every rank's input plus norm.residual, accumulated in float32
  // and rounded once to `type`; output = that rounded row x rsqrt(mean of its squares +
  // norm.eps) x norm.weight, in float32 and rounded once (as vLLM's fused_add_rms_norm reads the
  // updated residual). Without a residual, output = the norm of the rounded sum. In place:
  // output == input, residual_out == residual. Every rank gets the same bits. shm fuses the
  // add+norm into its all-reduce; other backends all-reduce in float32, then add and normalise
  // (the plan says which).
  void all_reduce_rmsnorm(const void* input, void* output, std::size_t count, DataType type,
                          const RmsNorm& norm);
  // On device buffers of a kCuda communicator, enqueued on `stream`: the custom kernels fuse the
  // epilogue (by rows, a block per row); NCCL all-reduces in fp32 first, then a kernel adds and
  // normalises. May be captured into a CUDA graph (NCCL's only after an eager call of its size).
  void all_reduce_rmsnorm(const void* input, void* output, std::size_t count, DataType type,
                          const RmsNorm& norm, CudaStream stream);

  // The same on device buffers of a kCuda communicator, enqueued on `stream` (null: the legacy
  // default stream). Calls of one communicator must be ordered (one stream, or streams that
  // wait on each other), as with NCCL. They may be captured into a CUDA graph.
  void all_reduce(const void* input, void* output, std::size_t count, DataType type, ReduceOp op,
                  CudaStream stream);
  void all_gather(const void* input, void* output, std::size_t count, DataType type,
                  CudaStream stream);
  void reduce_scatter(const void* input, void* output, std::size_t count, DataType type,
                      ReduceOp op, CudaStream stream);

  // MoE's token exchange. all_to_all: input holds size() blocks of `count` elements, block r for
  // rank r; output receives size() blocks, block r from rank r (no in-place form: every block
  // moves). all_to_allv: this rank sends send_counts[r] elements to rank r and receives
  // recv_counts[r] from it, the blocks back to back in rank order in input and output, any count
  // 0; each vector has size() counts, and rank r's send_counts[q] must equal rank q's
  // recv_counts[r]: every rank checks every pair before data moves, and a mismatch is kMismatch
  // on every rank (shm, gloo; NCCL does not check). all_to_allv reads the size table's last row
  // (plan.hpp, kPerPeerRoutedBytes): ranks' sizes differ, so none other is agreed.
  void all_to_all(const void* input, void* output, std::size_t count, DataType type);
  void all_to_allv(const void* input, const std::vector<std::size_t>& send_counts, void* output,
                   const std::vector<std::size_t>& recv_counts, DataType type);
  // Blocks of any size per rank: counts[r] elements from (all_gatherv) or for (reduce_scatterv)
  // rank r, back to back in rank order, any of them 0; every rank passes the same counts (their
  // digest is compared like the rest of the call). all_gatherv: input holds counts[rank()],
  // output their sum; reduce_scatterv: input holds their sum, output counts[rank()]. Routed by
  // their sum on the all_gather and reduce_scatter tables; a row of hier, custom or multimem goes
  // to the fallback engine (gloo, nccl). No in-place form.
  void all_gatherv(const void* input, void* output, const std::vector<std::size_t>& counts,
                   DataType type);
  void reduce_scatterv(const void* input, void* output, const std::vector<std::size_t>& counts,
                       DataType type, ReduceOp op);
  void all_gatherv(const void* input, void* output, const std::vector<std::size_t>& counts,
                   DataType type, CudaStream stream);
  void reduce_scatterv(const void* input, void* output, const std::vector<std::size_t>& counts,
                       DataType type, ReduceOp op, CudaStream stream);
  // Rooted calls; every rank passes the same count, type, op and root. gather: `count` elements
  // from each rank into the root's output (size() * count, block r from rank r; other ranks'
  // output is not touched and may be null). scatter: the root's input holds size() * count
  // elements, block r goes to rank r's output (other ranks' input may be null). reduce: the
  // reduction of every rank's `count` elements into the root's output (others' may be null).
  // In place on the root: gather input == output + root * count, scatter output == input + root *
  // count, reduce input == output.
  void gather(const void* input, void* output, std::size_t count, DataType type, int root);
  void scatter(const void* input, void* output, std::size_t count, DataType type, int root);
  void reduce(const void* input, void* output, std::size_t count, DataType type, ReduceOp op,
              int root);
  // The same on device buffers of a kCuda communicator, enqueued on `stream`: NCCL's grouped
  // sends and receives (all_to_all, all_to_allv, gather, scatter) and ncclReduce.
  void all_to_all(const void* input, void* output, std::size_t count, DataType type,
                  CudaStream stream);
  void all_to_allv(const void* input, const std::vector<std::size_t>& send_counts, void* output,
                   const std::vector<std::size_t>& recv_counts, DataType type, CudaStream stream);
  void gather(const void* input, void* output, std::size_t count, DataType type, int root,
              CudaStream stream);
  void scatter(const void* input, void* output, std::size_t count, DataType type, int root,
               CudaStream stream);
  void reduce(const void* input, void* output, std::size_t count, DataType type, ReduceOp op,
              int root, CudaStream stream);

  // Point-to-point (docs/communicator.md, "Point-to-point"). Not collective: only the two ranks
  // take part, and these calls stand outside the rule that every rank makes the same calls in
  // the same order (and outside TPCOMM_CHECK). Messages from one rank to another match in the
  // order they were started on each side; the receive names the sender, and count, type and
  // tag must match the send's (kMismatch otherwise). isend / irecv return at once with a
  // request that wait() completes: a wait progresses every message this rank started, so two
  // ranks that both send first never wait for each other (kCpu); a send's buffer may be reused
  // once its wait returns. send and recv are isend and irecv followed by their wait. A request
  // is waited for once; the communicator's timeout bounds each wait. On a kCuda communicator a
  // message is enqueued on `stream` (NCCL's send and receive; as with NCCL, two ranks that both
  // send first on one stream deadlock the GPU).
  using Request = std::uint64_t;
  void send(const void* buffer, std::size_t count, DataType type, int peer, int tag = 0);
  void recv(void* buffer, std::size_t count, DataType type, int peer, int tag = 0);
  Request isend(const void* buffer, std::size_t count, DataType type, int peer, int tag = 0);
  Request irecv(void* buffer, std::size_t count, DataType type, int peer, int tag = 0);
  // A receive from whichever rank's message comes first (host communicators; torch's recv
  // without a source): wait() says which.
  Request irecv_any(void* buffer, std::size_t count, DataType type, int tag = 0);
  // Completes the request; returns its peer (the sender, for irecv_any).
  int wait(Request request);
  Request isend(const void* buffer, std::size_t count, DataType type, int peer, int tag,
                CudaStream stream);
  Request irecv(void* buffer, std::size_t count, DataType type, int peer, int tag,
                CudaStream stream);

  // The root's `count` elements of `buffer` on every rank, bit for bit (broadcast moves bytes,
  // never rounds). It runs as all_gather calls of at most 1 MiB per rank, on the route the plan
  // gives all_gather for that size, with the same deadlines and failure handling. Every rank
  // passes the same count, type and root (TPCOMM_CHECK=1 verifies it).
  void broadcast(void* buffer, std::size_t count, DataType type, int root);
  // The same on a device buffer of a kCuda communicator, enqueued on `stream`. The first one
  // allocates the staging buffer: make it outside a CUDA graph capture.
  void broadcast(void* buffer, std::size_t count, DataType type, int root, CudaStream stream);
  // Returns once every rank has called it. On a host communicator it is one all-reduce of one
  // int32 on the plan's route (shm, Gloo or hier; no store request unless TPCOMM_CHECK=1 checks
  // every call through the store), with that call's deadline
  // and failure handling, and the backends tell it apart from a user's call. A kCuda
  // communicator's goes through the bootstrap, host-side: its earlier calls may still be running
  // on their streams.
  void barrier();
  // Every rank calls it (a collective call). The ranks that pass the same non-negative `color`
  // form a new communicator, ranked by `key` and then by their rank here; a rank that passes a
  // negative color takes part and gets nullptr (as MPI_UNDEFINED in MPI_Comm_split). Each new
  // communicator probes, plans and sets up on its own ranks' facts, with this one's options, and
  // may outlive it (e.g. the TP groups of a DP x TP world).
  std::unique_ptr<Communicator> split(int color, int key);

  // CUDA graphs: a captured call copies its input through the workspace, as an eager one does,
  // so graphs are correct as captured. After capturing, every rank calls this (a collective
  // call, like NCCL's): the input buffers of the calls captured since the last registration are
  // shared with the peers (CUDA IPC handles), and replays then read peers' inputs directly,
  // without the copy, where the plan allows zero-copy (`zero_copy` in the graph plan) and every
  // rank could share the buffer. Returns how many buffers are now read in place; the others keep
  // copying (the log says why).
  std::size_t register_graph_buffers();

  // Registered host memory (docs/registered.md). Collective: every rank calls allocate with the
  // same `bytes`, in the same order. Returns this rank's buffer (page-aligned), a POSIX
  // shared-memory segment every rank of the node maps, so a call whose input lies in it (at any
  // offset) is read in place by its peers instead of being copied through shm's lanes. Calls on
  // any other memory work as before. On a group without the shm backend (several nodes) the
  // buffer is private and calls copy as usual. CPU communicators only. Throws on every rank if
  // any rank fails (kUnavailable: /dev/shm too small, naming the rank).
  void* allocate(std::size_t bytes);
  // Collective, in the same order on every rank: unmaps what allocate returned. A call of
  // another thread in progress is waited for (calls are served one at a time). An error (and
  // nothing freed) for a pointer allocate did not return. Whatever is left is freed with the
  // communicator.
  void free(void* buffer);
  // Keeps the memory allocate returned at `buffer` mapped while the handle lives, also after
  // free() and after the communicator's end (private memory then, read by no peer): for a
  // language binding whose arrays may outlive both (Python's Communicator.empty). Not
  // collective; kInvalidInput for a pointer allocate did not return or that was freed.
  std::shared_ptr<void> keep_mapped(void* buffer);

  // Aborts: peers waiting on this rank fail promptly, later calls throw kAborted.
  void abort(const std::string& reason);
  bool aborted() const;

  // Ends the communicator before its destruction, from any thread (docs/communicator.md,
  // "Closing"): later calls throw kInvalidInput ("this communicator was closed"); a call in
  // flight on another thread is ended by an abort (it throws kAborted) and waited for; then the
  // peers are told this rank closed, and the backends' shared memory, sockets and threads are
  // released. rank(), size(), plan(), route(), facts() and stats() stay readable. Idempotent: a
  // second close() waits for the first. In a fork() child it only refuses later calls.
  void close();
  bool closed() const;

  // Where this rank's time went in staged calls (hier), per stage, since creation: what `tpcomm
  // bench` prints in its stages table. Empty where the plan stages no call. Read it between
  // calls (it is not a collective call).
  std::vector<StageTime> stage_times() const;

  // What this rank's calls have carried since creation or the last reset_stats(): calls and bytes
  // per collective and route, one row per route used (docs/communicator.md, "Statistics"). A
  // call is counted once it has completed here, under the backend that carried it. Always on
  // (two relaxed increments a call); read from any thread, at any time (not a collective call).
  std::vector<RouteStats> stats() const;
  void reset_stats();

 private:
  explicit Communicator(std::unique_ptr<runtime::CommunicatorState> state);
  std::unique_ptr<runtime::CommunicatorState> impl_;
  friend struct CommunicatorFactory;
};

}  // namespace tpcomm
