// The communicator's state, shared by its creation protocol (communicator_setup.cpp) and its
// calls (communicator.cpp).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "call_counters.hpp"
#include "call_queue.hpp"
#include "fault_injection.hpp"
#include "graph_safe_scratch.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/probe.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"
#include "transport/shm/registered_heap.hpp"

namespace tpcomm {

namespace detail {
std::shared_ptr<void> device_alloc(std::size_t bytes, int device);  // below
}  // namespace detail

using transport::BackendContext;

using detail::CommunicatorState;

using BackendFactory =
    std::function<std::unique_ptr<transport::CollectiveBackend>(const BackendContext&)>;

namespace detail {
struct Platform;
}  // namespace detail

// Everything a communicator is (the public class holds only a pointer to it).
struct detail::CommunicatorState {
  std::shared_ptr<Bootstrap> bootstrap;
  std::chrono::milliseconds timeout{60000};
  runtime::FaultPlan faults;
  bool check_calls = false;
  FactsTable facts;
  PlanOptions plan_options;
  Tuning tuning;  // TPCOMM_TUNING's overrides of the built-in size tables
  Plan plan;      // options.mode's (what plan() shows)
  // The tables calls use: kCuda eager calls the eager plan, captured calls the graph plan; a
  // kCpu communicator has only options.mode's, so both are copies of `plan`.
  Plan eager_plan;
  Plan graph_plan;
  std::map<Backend, std::unique_ptr<transport::CollectiveBackend>> backends;
  // Held by abort_with (any thread) while it calls the backends' abort(), and by the destructor
  // while it takes them out. Calls read `backends` without it: they never overlap destruction.
  mutable std::mutex backends_mutex;
  std::uint64_t sequence = 0;
  std::uint64_t comm_id = 0;
  int cuda_device = -1;
  // The rank that serves the group's store itself, if one does (read once at creation): a
  // store gone unreachable then names it.
  std::optional<int> store_served_by;
  // What it was created with, for split(): a sub-communicator is made the same way.
  CommunicatorOptions options;
  std::shared_ptr<const detail::Platform> platform;
  std::uint64_t splits = 0;             // split() calls so far (the same on every rank)
  std::vector<std::byte> host_scratch;  // broadcast's staging in host memory, kept between calls
  // Broadcast's staging on the GPU, made on first use; graphs may point at it (review N6). On
  // the communicator's GPU, whichever is the calling thread's current one (N18).
  runtime::GraphSafeScratch device_scratch{
      [this](std::size_t bytes) { return detail::device_alloc(bytes, cuda_device); }};
  // Communicator::allocate's buffers (read in place by shm; communicator_registered.cpp).
  std::shared_ptr<transport::shm::RegisteredHeap> heap;

  ~CommunicatorState();

  // The process that created it: a fork() child inherits the object but not the group (its
  // sockets, threads and segments are the parent's), so it may neither call nor tear it down.
  std::uint64_t fork_generation = 0;  // process_fork_generation() at creation
  // The calls of this communicator, one at a time in arrival order (call_queue.hpp).
  runtime::CallQueue calls;
  // What the calls carried (Communicator::stats()). While a broadcast runs, its all_gather
  // chunks count as that one broadcast: broadcast_chunks is how many it has run, else -1.
  runtime::CallCounters counters;
  int broadcast_chunks = -1;

  mutable std::mutex abort_mutex;
  std::optional<Error> abort_cause;
  // Set (release) after abort_cause is and the backends have told the peers: a call reads it
  // without taking the mutex.
  std::atomic<bool> aborted{false};

  Deadline deadline() const { return Deadline::after(timeout); }
  // Computes plan and graph_plan from the facts and plan_options.
  void make_plans();
  // device_call: the overload with a CUDA stream was used.
  void run_call(transport::Call call, bool device_call);
  std::size_t register_graph_buffers();
  // broadcast's argument checks (communicator_group_calls.cpp).
  void check_root(int root, const char* call) const;
  void check_broadcast(std::size_t count, DataType type, int root);
  // Runs a check of this rank's own buffers (check(): throws kInvalidInput). A refusal comes
  // before the call is numbered, and aborts the communicator: the peers may have made a valid
  // call, which would wait for this rank until its deadline; they fail at once instead, naming
  // the refusal (docs/errors.md).
  template <typename Check>
  void refuse_unusable_buffers(Check check) {
    try {
      check();
    } catch (const Error& e) {
      abort_with(e);
      throw;
    }
  }
  // All of broadcast's checks; the bytes of its staging buffer.
  std::size_t prepare_broadcast(void* buffer, std::size_t count, DataType type, int root);
  void abort_with(const Error& cause);
  // Whether this process is a fork() child of the one that created the communicator.
  bool in_forked_child() const;
  // Throws kInvalidInput naming fork() when in_forked_child(): `what` is the refused call.
  void refuse_in_forked_child(std::string_view what) const;
  // A failure of `what` that is not a tpcomm::Error (std::bad_alloc, std::system_error, ...) as
  // one: logged, and the communicator aborted so that the peers are told.
  Error foreign_failure(std::string_view what, const std::exception& e);
  // Throws kAborted with the first cause once the communicator was aborted.
  void throw_if_aborted() const;
  // Store keys of this communicator: presence of each rank (deleted by the store when the
  // rank's process dies) and the first abort's cause.
  std::string presence_key(int rank) const;
  std::string abort_key() const;
  // Set by a rank that closed the communicator normally (announce_close).
  std::string closed_key(int rank) const;
  void announce_close();
  // After a failed call: which peers are gone or aborted, for the error message. After a timeout
  // of call `sequence` (timed_out), also which peers did not time out in it as well: an engine
  // that cannot say who is missing (Gloo, NCCL) still gets the stalled rank named.
  std::string peer_report(bool timed_out = false, std::uint64_t call = 0);
  std::string timeout_report(Store& store, std::uint64_t call);
};

namespace detail {

// What a communicator is built from: its backends and how a rank learns its own hardware.
// Communicator::create uses this machine's (builtin_platform); tests pass stand-ins, such as a
// probe that reports GPUs and GPU backends whose set-up steps are scripted.
struct Platform {
  std::map<Backend, BackendFactory> factories;
  std::function<LocalFacts()> probe;
  // Why this build or machine cannot run a kCuda communicator, or empty.
  std::function<std::string()> gpu_unavailable_reason;
  // Node identity: the node index of every rank of a group of `size`. Unset (the built-in
  // platform): boot id plus a shared-memory probe. Tests set it to simulate nodes on threads.
  std::function<std::vector<int>(int size)> node_of_ranks;
};
Platform builtin_platform();

// The built-in backends: local, shm, hier and gloo, plus custom and nccl in a CUDA build.
std::map<Backend, BackendFactory> builtin_backend_factories();
// Adds the GPU backends of this build (none without CUDA); gpu_backends.cpp.
void add_gpu_backend_factories(std::map<Backend, BackendFactory>& factories);
// Why this build or machine cannot run a kCuda communicator, or empty.
std::string gpu_build_unavailable_reason();
// Whether `stream` (a cudaStream_t) is capturing a CUDA graph; false without CUDA.
bool stream_is_capturing(void* stream);
// Device memory of the communicator's GPU `device` (freed with the last reference; the calling
// thread's current device is left as it was), and an asynchronous device-to-device copy; both
// throw kUnavailable in a build without CUDA.
std::shared_ptr<void> device_alloc(std::size_t bytes, int device);
void device_copy_async(void* dst, const void* src, std::size_t bytes, void* stream);

// Keeps a fork() child's inherited communicator from being torn down (communicator_guards.cpp).
void abandon_in_forked_child(std::unique_ptr<CommunicatorState> state);

// Sets up every backend the plans use, voting after each step (backend_setup.cpp).
void set_up_backends(CommunicatorState& c, const std::map<Backend, BackendFactory>& factories,
                     const BackendContext& context);

std::unique_ptr<Communicator> create_communicator(std::shared_ptr<Bootstrap> bootstrap,
                                                  const CommunicatorOptions& options,
                                                  const Platform& platform);

}  // namespace detail
}  // namespace tpcomm
