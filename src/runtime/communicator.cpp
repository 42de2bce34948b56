// The public Communicator: each method forwards to the concern that owns it
// (communicator_state.hpp): calls pass the gate (call_gate.hpp) to dispatch (dispatch.hpp);
// failures and close notices go to the group abort (group_abort.hpp).
#include <fmt/format.h>

#include "communicator_state.hpp"
#include "control/store_request_deadline.hpp"
#include "dispatch.hpp"

namespace tpcomm {
namespace runtime {

CommunicatorState::CommunicatorState(std::shared_ptr<Bootstrap> group)
    : bootstrap(std::move(group)), group_rank(bootstrap->rank()), group_size(bootstrap->size()) {}

CommunicatorState::~CommunicatorState() {
  tear_down();
}

void CommunicatorState::tear_down() noexcept {
  if (torn_down_) return;
  torn_down_ = true;
  try {
    group_abort.announce_close();
    backends.close_all();
    bootstrap->store()->remove(group_abort.presence_key(group_rank));
  } catch (const std::exception&) {
    // The store is gone: nothing left to clean.
  }
  heap.reset();  // the mappings Python's arrays keep (keep_mapped) stay theirs
  std::vector<std::byte>().swap(host_scratch);
  group_abort.release();
  bootstrap.reset();
}

namespace {

// Keeps what a fork() child must not destroy: its destructors would deregister the parent's
// sockets from an epoll set the two processes share, join threads the child does not have,
// unlink the group's segments and talk on the parent's store connection. Reachable from here, it
// is not reported as a leak either.
void abandon_in_forked_child(std::unique_ptr<CommunicatorState> state) {
  static auto* abandoned = new std::vector<std::unique_ptr<CommunicatorState>>();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  abandoned->push_back(std::move(state));
}

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
  c.gate.run(to_string(call.op), [&] { run_call(c, call, device_call); });
}

}  // namespace
}  // namespace runtime

Communicator::Communicator(std::unique_ptr<runtime::CommunicatorState> state)
    : impl_(std::move(state)) {}

Communicator::~Communicator() {
  if (!impl_) return;
  if (impl_->gate.in_forked_child()) {
    runtime::abandon_in_forked_child(std::move(impl_));
  } else {
    close();
  }
}

void Communicator::close() {
  impl_->gate.close([this] { impl_->tear_down(); });
}

bool Communicator::closed() const {
  return impl_->gate.closed();
}

int Communicator::rank() const {
  return impl_->group_rank;
}
int Communicator::size() const {
  return impl_->group_size;
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

TableRow Communicator::route(Op op, std::uint64_t input_bytes, DataType type, Mode mode) const {
  return route_call(plan(mode), op, routed_bytes(op, input_bytes, size()), type);
}

const FactsTable& Communicator::facts() const {
  return impl_->facts;
}

std::size_t Communicator::register_graph_buffers() {
  return impl_->gate.run("register_graph_buffers",
                         [&] { return runtime::register_graph_buffers(*impl_); });
}

void Communicator::all_reduce_rmsnorm(const void* input, void* output, std::size_t count,
                                      DataType type, const RmsNorm& norm) {
  transport::Call call =
      runtime::call_of(Op::kAllReduceRmsNorm, input, output, count, type, ReduceOp::kSum, nullptr);
  call.norm = &norm;
  runtime::run_guarded(*impl_, call, false);
}

void Communicator::all_reduce_rmsnorm(const void* input, void* output, std::size_t count,
                                      DataType type, const RmsNorm& norm, CudaStream stream) {
  transport::Call call =
      runtime::call_of(Op::kAllReduceRmsNorm, input, output, count, type, ReduceOp::kSum, stream);
  call.norm = &norm;
  runtime::run_guarded(*impl_, call, true);
}

// The host-buffer overloads pass no stream; `device_call` keeps them apart from a device call on
// the legacy default stream (also null).
void Communicator::all_reduce(const void* input, void* output, std::size_t count, DataType type,
                              ReduceOp op) {
  runtime::run_guarded(
      *impl_, runtime::call_of(Op::kAllReduce, input, output, count, type, op, nullptr), false);
}

void Communicator::all_gather(const void* input, void* output, std::size_t count, DataType type) {
  runtime::run_guarded(
      *impl_, runtime::call_of(Op::kAllGather, input, output, count, type, ReduceOp::kSum, nullptr),
      false);
}

void Communicator::reduce_scatter(const void* input, void* output, std::size_t count, DataType type,
                                  ReduceOp op) {
  runtime::run_guarded(
      *impl_, runtime::call_of(Op::kReduceScatter, input, output, count, type, op, nullptr), false);
}

void Communicator::all_reduce(const void* input, void* output, std::size_t count, DataType type,
                              ReduceOp op, CudaStream stream) {
  runtime::run_guarded(
      *impl_, runtime::call_of(Op::kAllReduce, input, output, count, type, op, stream), true);
}

void Communicator::all_gather(const void* input, void* output, std::size_t count, DataType type,
                              CudaStream stream) {
  runtime::run_guarded(
      *impl_, runtime::call_of(Op::kAllGather, input, output, count, type, ReduceOp::kSum, stream),
      true);
}

void Communicator::reduce_scatter(const void* input, void* output, std::size_t count, DataType type,
                                  ReduceOp op, CudaStream stream) {
  runtime::run_guarded(
      *impl_, runtime::call_of(Op::kReduceScatter, input, output, count, type, op, stream), true);
}

namespace runtime {
namespace {

transport::Call rooted(Op op, const void* input, void* output, std::size_t count, DataType type,
                       ReduceOp reduce, int root, CudaStream stream) {
  transport::Call call = call_of(op, input, output, count, type, reduce, stream);
  call.root = root;
  return call;
}

void run_all_to_allv(CommunicatorState& c, const void* input,
                     const std::vector<std::size_t>& send_counts, void* output,
                     const std::vector<std::size_t>& recv_counts, DataType type, CudaStream stream,
                     bool device_call) {
  for (const auto* counts : {&send_counts, &recv_counts}) {
    if (counts->size() != static_cast<std::size_t>(c.group_size)) {
      throw invalid_input(
          fmt::format("rank {}: all_to_allv({}): {} {} counts for a group of {} (one per rank)",
                      c.group_rank, to_string(type), counts->size(),
                      counts == &send_counts ? "send" : "receive", c.group_size));
    }
  }
  transport::Call call = call_of(Op::kAllToAll, input, output, 0, type, ReduceOp::kSum, stream);
  call.send_counts = send_counts.data();
  call.recv_counts = recv_counts.data();
  run_guarded(c, call, device_call);
}

}  // namespace
}  // namespace runtime

void Communicator::all_to_all(const void* input, void* output, std::size_t count, DataType type) {
  runtime::run_guarded(
      *impl_, runtime::call_of(Op::kAllToAll, input, output, count, type, ReduceOp::kSum, nullptr),
      false);
}

void Communicator::all_to_allv(const void* input, const std::vector<std::size_t>& send_counts,
                               void* output, const std::vector<std::size_t>& recv_counts,
                               DataType type) {
  runtime::run_all_to_allv(*impl_, input, send_counts, output, recv_counts, type, nullptr, false);
}

void Communicator::gather(const void* input, void* output, std::size_t count, DataType type,
                          int root) {
  runtime::run_guarded(
      *impl_,
      runtime::rooted(Op::kGather, input, output, count, type, ReduceOp::kSum, root, nullptr),
      false);
}

void Communicator::scatter(const void* input, void* output, std::size_t count, DataType type,
                           int root) {
  runtime::run_guarded(
      *impl_,
      runtime::rooted(Op::kScatter, input, output, count, type, ReduceOp::kSum, root, nullptr),
      false);
}

void Communicator::reduce(const void* input, void* output, std::size_t count, DataType type,
                          ReduceOp op, int root) {
  runtime::run_guarded(
      *impl_, runtime::rooted(Op::kReduce, input, output, count, type, op, root, nullptr), false);
}

void Communicator::all_to_all(const void* input, void* output, std::size_t count, DataType type,
                              CudaStream stream) {
  runtime::run_guarded(
      *impl_, runtime::call_of(Op::kAllToAll, input, output, count, type, ReduceOp::kSum, stream),
      true);
}

void Communicator::all_to_allv(const void* input, const std::vector<std::size_t>& send_counts,
                               void* output, const std::vector<std::size_t>& recv_counts,
                               DataType type, CudaStream stream) {
  runtime::run_all_to_allv(*impl_, input, send_counts, output, recv_counts, type, stream, true);
}

void Communicator::gather(const void* input, void* output, std::size_t count, DataType type,
                          int root, CudaStream stream) {
  runtime::run_guarded(
      *impl_,
      runtime::rooted(Op::kGather, input, output, count, type, ReduceOp::kSum, root, stream), true);
}

void Communicator::scatter(const void* input, void* output, std::size_t count, DataType type,
                           int root, CudaStream stream) {
  runtime::run_guarded(
      *impl_,
      runtime::rooted(Op::kScatter, input, output, count, type, ReduceOp::kSum, root, stream),
      true);
}

void Communicator::reduce(const void* input, void* output, std::size_t count, DataType type,
                          ReduceOp op, int root, CudaStream stream) {
  runtime::run_guarded(
      *impl_, runtime::rooted(Op::kReduce, input, output, count, type, op, root, stream), true);
}

void Communicator::abort(const std::string& reason) {
  // Not queued behind the calls it is meant to end; in a fork() child it would tell the
  // parent's group through the parent's store connection; after close() nothing is left to end.
  impl_->gate.refuse_in_forked_child("abort");
  impl_->gate.refuse_if_closed("abort");
  impl_->group_abort.abort_with(Error(
      ErrorCode::kAborted, fmt::format("rank {}: aborted by the caller: {}", rank(), reason)));
}

bool Communicator::aborted() const {
  return impl_->group_abort.aborted();
}

std::vector<StageTime> Communicator::stage_times() const {
  return impl_->backends.stage_times();
}

std::vector<RouteStats> Communicator::stats() const {
  return impl_->counters.read();
}

void Communicator::reset_stats() {
  impl_->counters.reset();
}

}  // namespace tpcomm
