// Point-to-point messages from the gate to a backend (peer_messages.hpp).
#include "peer_messages.hpp"

#include <limits>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "communicator_state.hpp"

namespace tpcomm::runtime {
namespace {

// "send(float32 x 5, tag 0) to rank 1 #3"
std::string text(const transport::PeerMessage& m) {
  return fmt::format("{}({} x {}, tag {}) {} {} #{}", m.send ? "send" : "recv", to_string(m.type),
                     m.count, m.tag, m.send ? "to" : "from",
                     m.peer < 0 ? std::string("any rank") : fmt::format("rank {}", m.peer),
                     m.sequence);
}

void check_message(const CommunicatorState& c, const transport::PeerMessage& m, bool device_call) {
  const int rank = c.group_rank;
  const std::string what = m.send ? "send" : "recv";
  if (device_call != (c.plan.device_type == DeviceType::kCuda)) {
    throw invalid_input(fmt::format("rank {}: {} {} a stream on a {} communicator", rank, what,
                                    device_call ? "with" : "without",
                                    to_string(c.plan.device_type)));
  }
  const bool any = m.peer == -1 && !m.send;  // irecv_any
  if (!any && (m.peer < 0 || m.peer >= c.group_size || m.peer == rank)) {
    throw invalid_input(
        fmt::format("rank {}: {} {} rank {}: {}", rank, what, m.send ? "to" : "from", m.peer,
                    m.peer == rank ? "a rank's messages go to another rank"
                                   : fmt::format("not a rank of this group of {}", c.group_size)));
  }
  if (m.tag < 0) {
    throw invalid_input(fmt::format("rank {}: {}: tag {} is negative", rank, what, m.tag));
  }
  if (m.count > std::numeric_limits<std::size_t>::max() / size_of(m.type)) {
    throw invalid_input(
        fmt::format("rank {}: {} of {} elements of {}: more bytes than size_t "
                    "holds",
                    rank, what, m.count, to_string(m.type)));
  }
  if (m.count > 0 && m.buffer == nullptr) {
    throw invalid_input(
        fmt::format("rank {}: {}: null buffer for {} elements", rank, what, m.count));
  }
}

// Aborts the communicator with the message's failure, naming it, and throws that.
[[noreturn]] void fail(CommunicatorState& c, const transport::PeerMessage& m, Backend backend,
                       const Error& e) {
  const std::string peers =
      e.code() == ErrorCode::kMismatch ? std::string() : c.group_abort.peer_report();
  Error full(e.code(), fmt::format("rank {}: {} via {} failed: {}{}", c.group_rank, text(m),
                                   to_string(backend), e.what(), peers));
  TPCOMM_LOG(kError, "comm", "{}", full.what());
  c.group_abort.abort_with(full);
  throw full;
}

}  // namespace

std::uint64_t start_message(CommunicatorState& c, transport::PeerMessage m, bool device_call) {
  c.group_abort.throw_if_aborted();
  check_message(c, m, device_call);
  m.sequence = ++c.messages.count;
  const TableRow row = route_call(c.plan.device_type == DeviceType::kCuda ? c.eager_plan : c.plan,
                                  Op::kSendRecv, m.count * size_of(m.type), m.type);
  if (c.options.caller_serves_fallback && row.backend == fallback_backend(c.plan.device_type)) {
    throw invalid_input(
        fmt::format("rank {}: {}: the plan gives it to {}, which the caller "
                    "serves (CommunicatorOptions::caller_serves_fallback)",
                    c.group_rank, text(m), to_string(row.backend)));
  }
  if (!c.backends.has(row.backend)) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("rank {}: {}: {} is not set up here", c.group_rank, text(m),
                            to_string(row.backend)));
  }
  std::uint64_t handle = 0;
  try {
    handle = c.backends.at(row.backend).start(m);
  } catch (const Error& e) {
    fail(c, m, row.backend, e);
  }
  c.messages.started[m.sequence] = {m, row.backend, row.algorithm, handle};
  return m.sequence;
}

int wait_message(CommunicatorState& c, std::uint64_t request) {
  const auto it = c.messages.started.find(request);
  if (it == c.messages.started.end()) {
    throw invalid_input(
        fmt::format("rank {}: wait: request {} is not a message started and not "
                    "yet waited for",
                    c.group_rank, request));
  }
  const PeerMessages::Started s = it->second;
  c.messages.started.erase(it);
  c.group_abort.throw_if_aborted();
  int peer = s.message.peer;
  try {
    const int matched = c.backends.at(s.backend).wait(s.handle, c.deadline());
    if (peer < 0) peer = matched;
  } catch (const Error& e) {
    fail(c, s.message, s.backend, e);
  }
  c.counters.add(s.message.send ? Collective::kSend : Collective::kRecv, s.backend, s.algorithm, 1,
                 s.message.count * size_of(s.message.type));
  return peer;
}

}  // namespace tpcomm::runtime
