// The counters behind Communicator::stats(): one pair of relaxed atomics per (collective, backend,
// algorithm), so that counting costs a call two uncontended increments and reading them never
// waits for a call in flight.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "tpcomm/call_stats.hpp"

namespace tpcomm::runtime {

// The public call a call of `op` is counted as (all_to_all with per-peer counts: all_to_allv).
Collective collective_of(Op op, bool per_peer_counts);

class CallCounters {
 public:
  // `calls` is 0 for the second and later parts of one public call (a broadcast's chunks).
  void add(Collective collective, std::optional<Backend> backend,
           std::optional<Algorithm> algorithm, std::uint64_t calls, std::uint64_t bytes);
  // The routes that carried a call since creation or the last reset, in (collective, backend,
  // algorithm) order.
  std::vector<RouteStats> read() const;
  void reset();

 private:
  static constexpr std::size_t kCollectives = std::size(Names<Collective>::table);
  static constexpr std::size_t kBackends = std::size(Names<Backend>::table) + 1;  // + none
  static constexpr std::size_t kAlgorithms = std::size(Names<Algorithm>::table) + 1;
  struct Cell {
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> bytes{0};
  };
  std::array<Cell, kCollectives * kBackends * kAlgorithms> cells_;
};

}  // namespace tpcomm::runtime
