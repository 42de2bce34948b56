// Communicator calls: argument checks, the optional cross-rank signature check
// (TPCOMM_CHECK=1), dispatch by the plan's size table, and abort on any failure.
#include <map>

#include <fmt/format.h>

#include "call_checks.hpp"
#include "common/log_format.hpp"
#include "common/rank_list.hpp"
#include "communicator_impl.hpp"
#include "control/store_request_deadline.hpp"
#include "graph_copy_algorithm.hpp"
#include "guarded_call.hpp"
#include "transport/common/call_text.hpp"

namespace tpcomm {
namespace {

std::uint64_t call_bytes(const transport::Call& c, int size) {
  const std::uint64_t per = c.count * size_of(c.type);
  return c.op == Op::kAllReduce ? per : per * static_cast<std::uint64_t>(size);
}

// The plan's row for `call`, with the backend that carries a call of its type where the row's
// cannot (backend_for_type: integers on CUDA go to NCCL).
TableRow row_of(const Plan& table, const transport::Call& call, int rank, int size,
                const std::map<Backend, std::unique_ptr<transport::CollectiveBackend>>& backends,
                const CommunicatorOptions& options) {
  TableRow row = table.ops.at(call.op).row_for(call_bytes(call, size));
  const auto other = backend_for_type(row.backend, call.type);
  const Backend routed = other.value_or(row.backend);
  if (options.caller_serves_fallback && routed == fallback_backend(table.device_type)) {
    // Every rank has the same plan: every rank refuses this call, and none waits for another.
    throw invalid_input(
        fmt::format("rank {}: {} #{}: the plan gives it to {}, which the caller serves "
                    "(CommunicatorOptions::caller_serves_fallback): check the plan (route()) first",
                    rank, transport::call_signature(call), call.sequence, to_string(routed)));
  }
  if (!other) return row;
  if (!backends.count(*other)) {
    throw Error(
        ErrorCode::kUnavailable,
        fmt::format("rank {}: {} #{}: {} has no {} kernels, and {}, which carries such "
                    "calls on a {} communicator, is not set up here (the plan does not "
                    "use it)",
                    rank, transport::call_signature(call), call.sequence, to_string(row.backend),
                    to_string(call.type), to_string(*other), to_string(table.device_type)));
  }
  row.backend = *other;
  row.algorithm = algorithms_of(*other, call.op).front();
  row.blocks.reset();
  row.step_bytes.reset();
  return row;
}

// Counts a completed call (Communicator::stats()): a barrier as one, a broadcast's chunks as the
// one broadcast they make, any other as its collective.
void count_call(CommunicatorState& c, const transport::Call& call, const TableRow& row) {
  if (call.barrier) {
    c.counters.add(Collective::kBarrier, row.backend, row.algorithm, 1, size_of(call.type));
  } else if (c.broadcast_chunks >= 0) {
    c.counters.add(Collective::kBroadcast, row.backend, row.algorithm,
                   c.broadcast_chunks++ == 0 ? 1 : 0, call.count * size_of(call.type));
  } else {
    c.counters.add(static_cast<Collective>(call.op), row.backend, row.algorithm, 1,
                   call_bytes(call, c.bootstrap->size()));
  }
}

}  // namespace

std::string CommunicatorState::presence_key(int r) const {
  return fmt::format("tpcomm/c{:016x}/alive/{}", comm_id, r);
}

std::string CommunicatorState::abort_key() const {
  return fmt::format("tpcomm/c{:016x}/abort", comm_id);
}

std::string CommunicatorState::closed_key(int r) const {
  return fmt::format("tpcomm/c{:016x}/closed/{}", comm_id, r);
}

// A communicator destroyed normally (not aborted) tells its peers before it goes: the store's
// closed key names it in their errors (peer_report), and shm stops their waits on it at once
// instead of at their deadlines (docs/communicator.md, "Closing").
void CommunicatorState::announce_close() {
  if (aborted.load(std::memory_order_acquire)) return;
  try {
    const control::ScopedStoreDeadline bound(Deadline::after(std::chrono::milliseconds(250)));
    auto store = bootstrap->store();
    store->set(closed_key(bootstrap->rank()), Bytes{1});
    // The last rank to close takes the keys away: nobody is left to read them.
    const std::string count = fmt::format("tpcomm/c{:016x}/closed/count", comm_id);
    if (store->add(count, 1) == bootstrap->size()) {
      for (int r = 0; r < bootstrap->size(); ++r) store->remove(closed_key(r));
      store->remove(count);
    }
  } catch (const std::exception&) {
    // Best effort: the store's host closed first; the peers still learn it from shm.
  }
  std::lock_guard<std::mutex> lock(backends_mutex);
  for (auto& [kind, backend] : backends) backend->announce_close();
}

CommunicatorState::~CommunicatorState() {
  try {
    announce_close();
    // A watchdog thread's abort_with may be iterating the backends: they are taken out under the
    // mutex and destroyed outside it (destroying one joins its watchdog thread, which may be
    // waiting for the mutex), so that thread finds none (review N21).
    std::map<Backend, std::unique_ptr<transport::CollectiveBackend>> closing;
    {
      std::lock_guard<std::mutex> lock(backends_mutex);
      closing.swap(backends);
    }
    closing.clear();
    bootstrap->store()->remove(presence_key(bootstrap->rank()));
  } catch (const std::exception&) {
    // The store is gone: nothing left to clean.
  }
}

Communicator::Communicator(std::unique_ptr<detail::CommunicatorState> state)
    : impl_(std::move(state)) {}
Communicator::~Communicator() {
  if (impl_ && impl_->in_forked_child()) detail::abandon_in_forked_child(std::move(impl_));
}

int Communicator::rank() const {
  return impl_->bootstrap->rank();
}
int Communicator::size() const {
  return impl_->bootstrap->size();
}
int Communicator::cuda_device() const {
  return impl_->cuda_device;
}
const Plan& Communicator::plan() const {
  return impl_->plan;
}
const Plan& Communicator::plan(Mode mode) const {
  if (impl_->plan.device_type == DeviceType::kCuda) {
    return mode == Mode::kGraph ? impl_->graph_plan : impl_->eager_plan;
  }
  if (mode != impl_->plan.mode) {
    throw invalid_input(fmt::format("rank {}: a {} communicator plans only its options.mode ({})",
                                    rank(), to_string(impl_->plan.device_type),
                                    to_string(impl_->plan.mode)));
  }
  return impl_->plan;
}

std::size_t Communicator::register_graph_buffers() {
  return runtime::guarded_call(*impl_, "register_graph_buffers",
                               [&] { return impl_->register_graph_buffers(); });
}
const FactsTable& Communicator::facts() const {
  return impl_->facts;
}

namespace {

transport::Call call_of(Op op, const void* input, void* output, std::size_t count, DataType type,
                        ReduceOp reduce, CudaStream stream) {
  return {.op = op,
          .input = input,
          .output = output,
          .count = count,
          .type = type,
          .reduce = reduce,
          .stream = stream};
}

void run_guarded(CommunicatorState& c, const transport::Call& call, bool device_call) {
  runtime::guarded_call(c, to_string(call.op), [&] { c.run_call(call, device_call); });
}

}  // namespace

// The host-buffer overloads pass no stream; `device_call` keeps them apart from a device call on
// the legacy default stream (also null).
void Communicator::all_reduce(const void* input, void* output, std::size_t count, DataType type,
                              ReduceOp op) {
  run_guarded(*impl_, call_of(Op::kAllReduce, input, output, count, type, op, nullptr), false);
}

void Communicator::all_gather(const void* input, void* output, std::size_t count, DataType type) {
  run_guarded(*impl_, call_of(Op::kAllGather, input, output, count, type, ReduceOp::kSum, nullptr),
              false);
}

void Communicator::reduce_scatter(const void* input, void* output, std::size_t count, DataType type,
                                  ReduceOp op) {
  run_guarded(*impl_, call_of(Op::kReduceScatter, input, output, count, type, op, nullptr), false);
}

void Communicator::all_reduce(const void* input, void* output, std::size_t count, DataType type,
                              ReduceOp op, CudaStream stream) {
  run_guarded(*impl_, call_of(Op::kAllReduce, input, output, count, type, op, stream), true);
}

void Communicator::all_gather(const void* input, void* output, std::size_t count, DataType type,
                              CudaStream stream) {
  run_guarded(*impl_, call_of(Op::kAllGather, input, output, count, type, ReduceOp::kSum, stream),
              true);
}

void Communicator::reduce_scatter(const void* input, void* output, std::size_t count, DataType type,
                                  ReduceOp op, CudaStream stream) {
  run_guarded(*impl_, call_of(Op::kReduceScatter, input, output, count, type, op, stream), true);
}

void Communicator::abort(const std::string& reason) {
  // Not queued behind the calls it is meant to end; in a fork() child it would tell the
  // parent's group through the parent's store connection.
  impl_->refuse_in_forked_child("abort");
  impl_->abort_with(Error(ErrorCode::kAborted,
                          fmt::format("rank {}: aborted by the caller: {}", rank(), reason)));
}

bool Communicator::aborted() const {
  return impl_->aborted.load(std::memory_order_acquire);
}

std::vector<StageTime> Communicator::stage_times() const {
  std::vector<StageTime> out;
  for (const auto& [kind, backend] : impl_->backends) {
    for (auto& s : backend->stage_times()) out.push_back(std::move(s));
  }
  return out;
}

std::vector<RouteStats> Communicator::stats() const {
  return impl_->counters.read();
}

void Communicator::reset_stats() {
  impl_->counters.reset();
}

void CommunicatorState::abort_with(const Error& cause) {
  {
    std::lock_guard<std::mutex> lock(abort_mutex);
    if (abort_cause) return;
    abort_cause = cause;
  }
  // Outside the mutex (aborted() and a fork() child never wait on store I/O), and briefly: the
  // first cause, for the peers' messages (peer_report), is published before the backends close
  // the connections whose end the peers notice first; a store that does not answer at once
  // delays the abort by at most this.
  try {
    const control::ScopedStoreDeadline bound(Deadline::after(std::chrono::milliseconds(250)));
    const std::string text = cause.what();
    bootstrap->store()->compare_set(abort_key(), std::nullopt, Bytes(text.begin(), text.end()));
  } catch (const std::exception&) {
    // Best effort: the peers still fail when the connections close, or at their deadlines.
  }
  {
    // The backends tell the peers (on CUDA: the group's failure word in every workspace) before
    // this communicator refuses a call: a refused call followed by a graph replay would shift
    // this rank's steps against its peers' (docs/gpu.md, "The signalling protocol, checked").
    // Under backends_mutex: the destructor takes the backends out under it (review N21).
    std::lock_guard<std::mutex> lock(backends_mutex);
    for (auto& [kind, backend] : backends) backend->abort();
  }
  aborted.store(true, std::memory_order_release);
}

void CommunicatorState::throw_if_aborted() const {
  if (!aborted.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(abort_mutex);
  throw Error(ErrorCode::kAborted,
              fmt::format("the communicator was aborted earlier: {}", abort_cause->what()));
}

void CommunicatorState::run_call(transport::Call call, bool device_call) {
  const int rank = bootstrap->rank();
  if (plan.device_type == DeviceType::kCuda) {
    // A kernel that gave up after an earlier call returned: its failure is this call's error.
    for (auto& [kind, backend] : backends) {
      if (auto failure = backend->take_async_failure()) {
        abort_with(Error(ErrorCode::kTimeout, fmt::format("rank {}: {} failed after an earlier "
                                                          "call returned: {}",
                                                          rank, to_string(kind), *failure)));
      }
    }
  }
  throw_if_aborted();
  if (device_call != (plan.device_type == DeviceType::kCuda)) {
    throw invalid_input(fmt::format(
        "rank {}: {} called {} a stream on a {} communicator ({})", rank, to_string(call.op),
        device_call ? "with" : "without", to_string(plan.device_type),
        device_call ? "create it with CommunicatorOptions::device = kCuda for device buffers"
                    : "device buffers need the overload that takes a CUDA stream"));
  }
  if (!is_floating(call.type) && call.reduce == ReduceOp::kAvg && call.op != Op::kAllGather) {
    throw invalid_input(
        fmt::format("rank {}: {} of {}: avg is for floating-point types (an integer "
                    "average would round); use sum and divide",
                    rank, to_string(call.op), to_string(call.type)));
  }
  refuse_unusable_buffers([&] {
    if (call.count > 0 && (call.input == nullptr || call.output == nullptr)) {
      throw invalid_input(fmt::format("rank {}: {}: null buffer for {} elements", rank,
                                      to_string(call.op), call.count));
    }
    runtime::check_call_buffers(call, rank, bootstrap->size());
  });
  call.sequence = ++sequence;
  call.captured = device_call && detail::stream_is_capturing(call.stream);
  const Plan& table = call.captured ? graph_plan : eager_plan;
  const TableRow row = row_of(table, call, rank, bootstrap->size(), backends, options);
  call.algorithm = row.algorithm;
  if (call.captured) {
    call.unregistered_algorithm = runtime::unregistered_replay_algorithm(
        row, eager_plan.ops.at(call.op).row_for(call_bytes(call, bootstrap->size())));
  }
  call.blocks = row.blocks.value_or(0);
  call.step_bytes = row.step_bytes.value_or(0);
  try {
    // No store request of the call waits past its deadline (the report below has its own bound).
    const control::ScopedStoreDeadline bound(deadline());
    if (check_calls) {
      const std::string mine = transport::call_signature(call);
      auto all = bootstrap->all_gather(Bytes(mine.begin(), mine.end()),
                                       fmt::format("call check #{}", call.sequence), deadline());
      std::map<std::string, std::vector<int>> by_signature;
      for (std::size_t r = 0; r < all.size(); ++r) {
        by_signature[std::string(all[r].begin(), all[r].end())].push_back(static_cast<int>(r));
      }
      if (by_signature.size() > 1) {
        std::vector<std::string> sides;
        for (const auto& [sig, ranks] : by_signature) {
          sides.push_back(fmt::format("{} called {}", detail::rank_set_text(ranks), sig));
        }
        throw Error(ErrorCode::kMismatch,
                    fmt::format("call #{} does not match across ranks (TPCOMM_CHECK=1): {}",
                                call.sequence, fmt::join(sides, "; ")));
      }
    }
    faults.apply_fail_or_stall("call", static_cast<std::int64_t>(call.sequence));
    backends.at(row.backend)->run(call);
    count_call(*this, call, row);
  } catch (const Error& e) {
    const std::string peers = e.code() == ErrorCode::kMismatch
                                  ? std::string()
                                  : peer_report(e.code() == ErrorCode::kTimeout, call.sequence);
    Error full(e.code(), fmt::format("rank {}: {} #{} via {} failed: {}{}", rank,
                                     transport::call_signature(call), call.sequence,
                                     to_string(row.backend), e.what(), peers));
    TPCOMM_LOG(kError, "comm", "{}", full.what());
    abort_with(full);
    throw full;
  }
}

}  // namespace tpcomm

namespace tpcomm {

std::size_t CommunicatorState::register_graph_buffers() {
  throw_if_aborted();
  std::size_t registered = 0;
  try {
    // Every rank has the same backends, in the same (map) order: the collective calls match.
    for (auto& [kind, backend] : backends)
      registered += backend->register_graph_buffers(deadline());
  } catch (const Error& e) {
    Error full(e.code(), fmt::format("rank {}: register_graph_buffers failed: {}{}",
                                     bootstrap->rank(), e.what(), peer_report()));
    TPCOMM_LOG(kError, "comm", "{}", full.what());
    abort_with(full);
    throw full;
  }
  return registered;
}

}  // namespace tpcomm
