// What a communicator is (the public class holds only a pointer to it): its group, its plans, and
// the parts each concern owns. Creation fills it (communicator_setup.cpp, backend_setup.cpp);
// every call goes through `gate` (call_gate.hpp) to dispatch.cpp, which routes it by the plan to
// one of `backends` (backend_set.hpp); a failure anywhere goes to `group_abort`
// (group_abort.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backend_set.hpp"
#include "call_counters.hpp"
#include "call_gate.hpp"
#include "fault_injection.hpp"
#include "group_abort.hpp"
#include "peer_messages.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/probe.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"
#include "transport/common/graph_safe_scratch.hpp"
#include "transport/shm/shm_registered_heap.hpp"

namespace tpcomm::runtime {

using transport::BackendContext;
using BackendFactory =
    std::function<std::unique_ptr<transport::CollectiveBackend>(const BackendContext&)>;

struct Platform;

// Device memory of the communicator's GPU `device` (freed with the last reference; the calling
// thread's current device is left as it was); throws kUnavailable in a build without CUDA.
std::shared_ptr<void> device_alloc(std::size_t bytes, int device);

struct CommunicatorState {
  explicit CommunicatorState(std::shared_ptr<Bootstrap> group);
  ~CommunicatorState();  // tear_down() if close() did not
  CommunicatorState(const CommunicatorState&) = delete;
  CommunicatorState& operator=(const CommunicatorState&) = delete;

  // The group (released by close(); its rank and size stay), and what it was created with
  // (split() makes a sub-communicator the same way).
  std::shared_ptr<Bootstrap> bootstrap;
  const int group_rank;
  const int group_size;
  CommunicatorOptions options;
  std::shared_ptr<const Platform> platform;
  std::chrono::milliseconds timeout{60000};
  std::uint64_t comm_id = 0;  // the same on every rank
  int cuda_device = -1;

  // The plan: the facts and inputs it was made from, and the tables calls use. A kCuda
  // communicator's eager calls use eager_plan, captured calls graph_plan; a kCpu communicator has
  // only options.mode's, so both are copies of `plan` (what plan() shows).
  FactsTable facts;
  PlanOptions plan_options;
  Tuning tuning;  // TPCOMM_TUNING's overrides of the built-in size tables
  Plan plan;
  Plan eager_plan;
  Plan graph_plan;

  // The concerns, in the order they depend on each other.
  BackendSet backends;
  GroupAbort group_abort{bootstrap, backends};
  CallGate gate{group_abort, group_rank};

  // Per call: numbering, the optional cross-rank check (TPCOMM_CHECK=1), injected faults, and
  // what the calls carried (stats()). While a broadcast runs, its all_gather chunks count as that
  // one broadcast: broadcast_chunks is how many it has run, else -1.
  std::uint64_t sequence = 0;
  bool check_calls = false;
  FaultPlan faults;
  CallCounters counters;
  int broadcast_chunks = -1;
  PeerMessages messages;  // point-to-point, numbered apart from the calls (peer_messages.hpp)

  // Buffers kept between calls: broadcast's staging in host memory, and on the GPU (made on
  // first use; graphs may point at it, so it is never moved while one might), and
  // Communicator::allocate's registered buffers (read in place by shm).
  std::vector<std::byte> host_scratch;
  std::vector<float> norm_sums;  // all_reduce_rmsnorm's float32 sums where a backend does not fuse
  std::vector<std::byte> ordered_scratch;  // deterministic mode's gathered inputs
  transport::GraphSafeScratch device_scratch{
      [this](std::size_t bytes) { return device_alloc(bytes, cuda_device); }};
  std::shared_ptr<transport::shm::RegisteredHeap> heap;
  std::uint64_t splits = 0;  // split() calls so far (the same on every rank)

  Deadline deadline() const { return Deadline::after(timeout); }
  // Computes plan, eager_plan and graph_plan from the facts and plan_options.
  void make_plans();
  // Tells the peers this rank closed, then releases everything but what stays readable (the
  // plans, the facts, the statistics): the backends, the presence key, the registered heap,
  // the host scratch and the bootstrap, whose group slot a new communicator of this process may
  // then take. Once.
  void tear_down() noexcept;
  // Runs a check of this rank's own buffers (check(): throws kInvalidInput). A refusal comes
  // before the call is numbered, and aborts the communicator: the peers may have made a valid
  // call, which would wait for this rank until its deadline; they fail at once instead, naming
  // the refusal (docs/errors.md).
  template <typename Check>
  void refuse_unusable_buffers(Check check) {
    try {
      check();
    } catch (const Error& e) {
      group_abort.abort_with(e);
      throw;
    }
  }

 private:
  bool torn_down_ = false;
};

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
// An asynchronous device-to-device copy; throws kUnavailable in a build without CUDA.
void device_copy_async(void* dst, const void* src, std::size_t bytes, void* stream);

// Sets up every backend the plans use, voting after each step (backend_setup.cpp).
void set_up_backends(CommunicatorState& c, const std::map<Backend, BackendFactory>& factories,
                     const BackendContext& context);

std::unique_ptr<Communicator> create_communicator(std::shared_ptr<Bootstrap> bootstrap,
                                                  const CommunicatorOptions& options,
                                                  const Platform& platform);

}  // namespace tpcomm::runtime
