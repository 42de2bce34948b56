// What a communicator has carried: calls and bytes per collective and per route (backend and
// algorithm), what Communicator::stats() returns. A deployment reads it to confirm which path
// served its collectives without a profiler.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tpcomm/types.hpp"

namespace tpcomm {

// The public calls counted. broadcast and barrier run as other collectives inside; they are
// counted as themselves, not as the calls they are made of.
enum class Collective {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kBarrier,
  kAllToAll,
  kAllToAllv,
  kGather,
  kScatter,
  kReduce,
  kSend,
  kRecv,
  kAllGatherv,
  kReduceScatterv,
  kAllReduceRmsNorm
};

template <>
struct Names<Collective> {
  static constexpr NamedValue<Collective> table[] = {
      {Collective::kAllReduce, "all_reduce"},
      {Collective::kAllGather, "all_gather"},
      {Collective::kReduceScatter, "reduce_scatter"},
      {Collective::kBroadcast, "broadcast"},
      {Collective::kBarrier, "barrier"},
      {Collective::kAllToAll, "all_to_all"},
      {Collective::kAllToAllv, "all_to_allv"},
      {Collective::kGather, "gather"},
      {Collective::kScatter, "scatter"},
      {Collective::kReduce, "reduce"},
      {Collective::kSend, "send"},
      {Collective::kRecv, "recv"},
      {Collective::kAllGatherv, "all_gatherv"},
      {Collective::kReduceScatterv, "reduce_scatterv"},
      {Collective::kAllReduceRmsNorm, "all_reduce_rmsnorm"}};
};
static_assert(names_in_declaration_order<Collective>());

constexpr std::string_view to_string(Collective v) {
  return name_of(v);
}

// One route of one collective. backend and algorithm are the ones that carried the calls, a
// fallback's where the plan's row could not (integers on CUDA: nccl); both empty for a call that
// went through the bootstrap (a CUDA communicator's barrier).
struct RouteStats {
  Collective collective = Collective::kAllReduce;
  std::optional<Backend> backend;
  std::optional<Algorithm> algorithm;
  std::uint64_t calls = 0;
  // The size the plan's table is read at: all_reduce the buffer, all_gather the gathered output,
  // reduce_scatter the input, broadcast the buffer, barrier 4 (one int32), all_to_all the input,
  // gather the gathered output, scatter the root's input, reduce the buffer; all_to_allv this
  // rank's input (what it sent); send and recv the message; all_gatherv the gathered output,
  // reduce_scatterv the input.
  std::uint64_t bytes = 0;
};

}  // namespace tpcomm
