// CallCounters (call_counters.hpp).
#include "call_counters.hpp"

namespace tpcomm {

namespace runtime {

Collective collective_of(Op op, bool per_peer_counts) {
  switch (op) {
    case Op::kAllReduce:
      return Collective::kAllReduce;
    case Op::kAllGather:
      return Collective::kAllGather;
    case Op::kReduceScatter:
      return Collective::kReduceScatter;
    case Op::kAllToAll:
      return per_peer_counts ? Collective::kAllToAllv : Collective::kAllToAll;
    case Op::kGather:
      return Collective::kGather;
    case Op::kScatter:
      return Collective::kScatter;
    case Op::kReduce:
      return Collective::kReduce;
    case Op::kAllReduceRmsNorm:
      return Collective::kAllReduceRmsNorm;
    case Op::kSendRecv:  // counted as send or recv (the communicator's point-to-point calls)
      return Collective::kSend;
  }
  return Collective::kAllReduce;
}

namespace {

// Index kNone of a dimension is "none" (a call that no backend carried).
template <typename E>
std::size_t slot(std::optional<E> value, std::size_t none) {
  return value ? static_cast<std::size_t>(*value) : none;
}

}  // namespace

void CallCounters::add(Collective collective, std::optional<Backend> backend,
                       std::optional<Algorithm> algorithm, std::uint64_t calls,
                       std::uint64_t bytes) {
  Cell& cell =
      cells_[(static_cast<std::size_t>(collective) * kBackends + slot(backend, kBackends - 1)) *
                 kAlgorithms +
             slot(algorithm, kAlgorithms - 1)];
  cell.calls.fetch_add(calls, std::memory_order_relaxed);
  cell.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

std::vector<RouteStats> CallCounters::read() const {
  std::vector<RouteStats> out;
  for (std::size_t i = 0; i < cells_.size(); ++i) {
    const std::uint64_t calls = cells_[i].calls.load(std::memory_order_relaxed);
    const std::uint64_t bytes = cells_[i].bytes.load(std::memory_order_relaxed);
    if (calls == 0 && bytes == 0) continue;
    const std::size_t a = i % kAlgorithms;
    const std::size_t b = (i / kAlgorithms) % kBackends;
    RouteStats row;
    row.collective = static_cast<Collective>(i / (kAlgorithms * kBackends));
    if (b + 1 < kBackends) row.backend = static_cast<Backend>(b);
    if (a + 1 < kAlgorithms) row.algorithm = static_cast<Algorithm>(a);
    row.calls = calls;
    row.bytes = bytes;
    out.push_back(row);
  }
  return out;
}

void CallCounters::reset() {
  for (Cell& cell : cells_) {
    cell.calls.store(0, std::memory_order_relaxed);
    cell.bytes.store(0, std::memory_order_relaxed);
  }
}

}  // namespace runtime
}  // namespace tpcomm
