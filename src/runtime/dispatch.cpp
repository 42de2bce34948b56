// A call's way from the gate to a backend (dispatch.hpp): check, route, execute.
#include "dispatch.hpp"

#include <map>

#include <fmt/format.h>

#include "call_checks.hpp"
#include "common/log_format.hpp"
#include "common/rank_list.hpp"
#include "control/store_request_deadline.hpp"
#include "graph_copy_algorithm.hpp"
#include "ordered_reduction.hpp"
#include "transport/common/call_sizes.hpp"
#include "transport/common/call_text.hpp"
#include "unfused_rmsnorm.hpp"

namespace tpcomm::runtime {
namespace {

// A GPU kernel that gave up after an earlier call returned: its failure is this call's error.
void take_async_failures(CommunicatorState& c) {
  for (const auto& [kind, backend] : c.backends.all()) {
    if (auto failure = backend->take_async_failure()) {
      c.group_abort.abort_with(Error(
          ErrorCode::kTimeout, fmt::format("rank {}: {} failed after an earlier call returned: {}",
                                           c.bootstrap->rank(), to_string(kind), *failure)));
    }
  }
}

// Everything about a call that this rank can check alone, before it is numbered.
void check_call(CommunicatorState& c, const transport::Call& call, bool device_call) {
  const int rank = c.bootstrap->rank();
  const DeviceType device = c.plan.device_type;
  if (device == DeviceType::kCuda) take_async_failures(c);
  c.group_abort.throw_if_aborted();
  if (device_call != (device == DeviceType::kCuda)) {
    throw invalid_input(fmt::format(
        "rank {}: {} called {} a stream on a {} communicator ({})", rank, to_string(call.op),
        device_call ? "with" : "without", to_string(device),
        device_call ? "create it with CommunicatorOptions::device = kCuda for device buffers"
                    : "device buffers need the overload that takes a CUDA stream"));
  }
  if (!is_floating(call.type) && call.reduce == ReduceOp::kAvg && reduces(call.op)) {
    throw invalid_input(
        fmt::format("rank {}: {} of {}: avg is for floating-point types (an integer "
                    "average would round); use sum and divide",
                    rank, to_string(call.op), to_string(call.type)));
  }
  c.refuse_unusable_buffers([&] { check_call_buffers(call, rank, c.bootstrap->size()); });
}

// The row that carries `call` (route_call), refused where nothing here may carry it. Every rank
// has the same plan and backends: every rank refuses the same calls, and none waits for another.
TableRow route(const CommunicatorState& c, const Plan& table, const transport::Call& call) {
  TableRow row = route_call(table, call.op, call_bytes(call, c.bootstrap->size()), call.type);
  // The staged and GPU-kernel backends have no form with counts: the fallback engine carries
  // all_to_allv, all_gatherv and reduce_scatterv where the row names one of them.
  const bool counts = transport::per_rank_counts(call) || call.send_counts != nullptr;
  if (counts && !takes_counts(row.backend)) {
    row.backend = fallback_backend(table.device_type);
    row.algorithm = algorithms_of(row.backend, call.op).front();
    row.blocks.reset();
    row.step_bytes.reset();
  }
  // Only a refusal names the call: formatting it on every call cost about a microsecond.
  auto which = [&] {
    return fmt::format("rank {}: {} #{}", c.bootstrap->rank(), transport::call_signature(call),
                       call.sequence);
  };
  if (c.options.caller_serves_fallback && row.backend == fallback_backend(table.device_type)) {
    throw invalid_input(
        fmt::format("{}: the plan gives it to {}, which the caller serves "
                    "(CommunicatorOptions::caller_serves_fallback): check the plan (route()) first",
                    which(), to_string(row.backend)));
  }
  // Deterministic mode on device buffers: NCCL gathers and sums in rank order itself
  // (Call::ordered); any other backend whose reductions do not keep the order (the plan leaves
  // multimem out of the mode's reduction tables) is refused here, before anything moves: every
  // rank refuses it alike and the communicator stays usable.
  if (table.device_type == DeviceType::kCuda && row.backend != Backend::kNccl &&
      takes_ordered_form(table, row.backend, call)) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("{}: deterministic mode: {} does not sum in rank order", which(),
                            to_string(row.backend)));
  }
  if (!c.backends.has(row.backend)) {
    const Backend planned =
        table.ops.at(call.op).row_for(call_bytes(call, c.bootstrap->size())).backend;
    throw Error(ErrorCode::kUnavailable,
                fmt::format("{}: {} has no {} kernels, and {}, which carries such calls on a {} "
                            "communicator, is not set up here (the plan does not use it)",
                            which(), to_string(planned), to_string(call.type),
                            to_string(row.backend), to_string(table.device_type)));
  }
  return row;
}

// With TPCOMM_CHECK=1: the call's signature on every rank, compared (kMismatch names both sides).
void check_across_ranks(CommunicatorState& c, const transport::Call& call) {
  const std::string mine = transport::call_signature(call);
  auto all = c.bootstrap->all_gather(Bytes(mine.begin(), mine.end()),
                                     fmt::format("call check #{}", call.sequence), c.deadline());
  std::map<std::string, std::vector<int>> by_signature;
  for (std::size_t r = 0; r < all.size(); ++r) {
    by_signature[std::string(all[r].begin(), all[r].end())].push_back(static_cast<int>(r));
  }
  if (by_signature.size() == 1) return;
  std::vector<std::string> sides;
  for (const auto& [sig, ranks] : by_signature) {
    sides.push_back(fmt::format("{} called {}", common::rank_set_text(ranks), sig));
  }
  throw Error(ErrorCode::kMismatch,
              fmt::format("call #{} does not match across ranks (TPCOMM_CHECK=1): {}",
                          call.sequence, fmt::join(sides, "; ")));
}

// Counts a completed call (Communicator::stats()): a barrier as one, a broadcast's chunks as the
// one broadcast they make, any other as its collective.
void count_call(CommunicatorState& c, const transport::Call& call, const TableRow& row) {
  if (call.barrier) {
    c.counters.add(Collective::kBarrier, row.backend, row.algorithm, 1, size_of(call.type));
  } else if (c.broadcast_chunks >= 0) {
    c.counters.add(Collective::kBroadcast, row.backend, row.algorithm,
                   c.broadcast_chunks++ == 0 ? 1 : 0, call.count * size_of(call.type));
  } else if (transport::per_rank_counts(call)) {
    c.counters.add(
        call.op == Op::kAllGather ? Collective::kAllGatherv : Collective::kReduceScatterv,
        row.backend, row.algorithm, 1, call.count * size_of(call.type));
  } else if (call.send_counts != nullptr) {
    c.counters.add(Collective::kAllToAllv, row.backend, row.algorithm, 1,
                   transport::sum_of(call.send_counts, c.bootstrap->size()) * size_of(call.type));
  } else {
    c.counters.add(collective_of(call.op, false), row.backend, row.algorithm, 1,
                   call_bytes(call, c.bootstrap->size()));
  }
}

// A call on its backend: in deterministic mode a reduction the backend would not sum in rank
// order takes the ordered form (ordered_reduction.hpp); on host buffers all_reduce_rmsnorm takes
// the runtime's unfused form where the backend does not fuse it (NCCL runs its own).
void run_routed(CommunicatorState& c, const transport::Call& call, Backend backend) {
  auto& engine = c.backends.at(backend);
  const int rank = c.bootstrap->rank(), size = c.bootstrap->size();
  const auto run = [&](const transport::Call& one) {
    if (!takes_ordered_form(c.plan, backend, one)) return engine.run(one);
    if (c.plan.device_type == DeviceType::kCuda) {  // the backend gathers and sums (NCCL)
      transport::Call ordered = one;
      ordered.ordered = true;
      return engine.run(ordered);
    }
    run_ordered(engine, one, rank, size, c.ordered_scratch);
  };
  if (call.op == Op::kAllReduceRmsNorm && !fuses_rmsnorm(backend) &&
      c.plan.device_type == DeviceType::kCpu) {
    return run_unfused_rmsnorm(call, c.norm_sums, run);
  }
  run(call);
}

// Runs the routed call; any failure aborts the communicator, naming the call and the peers.
void execute(CommunicatorState& c, const transport::Call& call, const TableRow& row) {
  try {
    // No store request of the call waits past its deadline (the report below has its own bound).
    const control::ScopedStoreDeadline bound(c.deadline());
    if (c.check_calls) check_across_ranks(c, call);
    c.faults.apply_fail_or_stall("call", static_cast<std::int64_t>(call.sequence));
    run_routed(c, call, row.backend);
    count_call(c, call, row);
  } catch (const Error& e) {
    const std::string peers =
        e.code() == ErrorCode::kMismatch
            ? std::string()
            : c.group_abort.peer_report(e.code() == ErrorCode::kTimeout, call.sequence);
    Error full(e.code(), fmt::format("rank {}: {} #{} via {} failed: {}{}", c.bootstrap->rank(),
                                     transport::call_signature(call), call.sequence,
                                     to_string(row.backend), e.what(), peers));
    TPCOMM_LOG(kError, "comm", "{}", full.what());
    c.group_abort.abort_with(full);
    throw full;
  }
}

}  // namespace

std::uint64_t call_bytes(const transport::Call& call, int size) {
  // all_to_allv: the ranks' sizes differ and none knows the others', so every rank reads the
  // table where it agrees for any size: its last row (docs/plan.md, "How it is decided").
  if (call.op == Op::kAllToAll && call.send_counts != nullptr) return kPerPeerRoutedBytes;
  // all_gatherv and reduce_scatterv: the sum every rank agrees on (the gathered output, the
  // reduced input).
  if (transport::per_rank_counts(call)) return call.count * size_of(call.type);
  const std::uint64_t per = call.count * size_of(call.type);
  const bool whole =
      call.op == Op::kReduceScatter || call.op == Op::kAllToAll || call.op == Op::kScatter;
  return routed_bytes(call.op, whole ? per * static_cast<std::uint64_t>(size) : per, size);
}

void run_call(CommunicatorState& c, transport::Call call, bool device_call) {
  check_call(c, call, device_call);
  call.sequence = ++c.sequence;
  call.captured = device_call && stream_is_capturing(call.stream);
  const Plan& table = call.captured ? c.graph_plan : c.eager_plan;
  const TableRow row = route(c, table, call);
  call.algorithm = row.algorithm;
  if (call.captured) {
    call.unregistered_algorithm = unregistered_replay_algorithm(
        row, c.eager_plan.ops.at(call.op).row_for(call_bytes(call, c.bootstrap->size())));
  }
  call.blocks = row.blocks.value_or(0);
  call.step_bytes = row.step_bytes.value_or(0);
  execute(c, call, row);
}

std::size_t register_graph_buffers(CommunicatorState& c) {
  c.group_abort.throw_if_aborted();
  std::size_t registered = 0;
  try {
    for (const auto& [kind, backend] : c.backends.all())
      registered += backend->register_graph_buffers(c.deadline());
  } catch (const Error& e) {
    Error full(e.code(), fmt::format("rank {}: register_graph_buffers failed: {}{}",
                                     c.bootstrap->rank(), e.what(), c.group_abort.peer_report()));
    TPCOMM_LOG(kError, "comm", "{}", full.what());
    c.group_abort.abort_with(full);
    throw full;
  }
  return registered;
}

}  // namespace tpcomm::runtime
