// hier's all_gatherv and reduce_scatterv (hier_ops.hpp): the stages of the all-gather and the
// reduce-scatter, with each stage's blocks the sums of the ranks' counts it carries. Rank r's
// count is the same on every rank (the communicator digests them), so every rank knows every
// stage's counts without asking.
#include <cstring>
#include <vector>

#include "hier_ops.hpp"
#include "hier_stage_type.hpp"
#include "transport/common/call_sizes.hpp"

namespace tpcomm::transport {
namespace {

// The counts each stage carries: along this rank's lane, node j's rank's block; inside the node,
// local rank k's blocks of every node together.
struct StageCounts {
  std::vector<std::size_t> lane, node;
};
StageCounts stage_counts(const HierStages& s, const Call& c) {
  StageCounts counts{std::vector<std::size_t>(s.nodes(), 0),
                     std::vector<std::size_t>(s.local_size(), 0)};
  for (std::size_t j = 0; j < s.nodes(); ++j) {
    for (std::size_t k = 0; k < s.local_size(); ++k) {
      const std::size_t count = c.recv_counts[static_cast<std::size_t>(s.rank_at()[j][k])];
      if (k == s.local_index()) counts.lane[j] = count;
      counts.node[k] += count;
    }
  }
  return counts;
}

// Where each rank's block starts in rank order, in elements.
std::vector<std::size_t> rank_starts(const Call& c, std::size_t w) {
  std::vector<std::size_t> at(w + 1, 0);
  for (std::size_t r = 0; r < w; ++r) at[r + 1] = at[r] + c.recv_counts[r];
  return at;
}

}  // namespace

// Along the lane first (each block crosses between nodes once), then inside the node, then the
// blocks, held [local index][node], in rank order.
void hier_all_gatherv(HierStages& s, const Call& c) {
  const std::size_t es = size_of(c.type);
  const StageCounts counts = stage_counts(s, c);
  const std::size_t lane_total = sum_of(counts.lane.data(), static_cast<int>(s.nodes()));
  std::uint8_t* lane_blocks = s.scratch(Scratch::kBytes, lane_total * es);
  s.on_lane(c, {.op = Op::kAllGather,
                .input = c.input,
                .output = lane_blocks,
                .count = lane_total,
                .type = c.type,
                .recv_counts = counts.lane.data(),
                .counts_digest = counts_digest(counts.lane.data(), counts.lane.size())});
  std::uint8_t* node_blocks = s.scratch(Scratch::kBytesNode, c.count * es);
  s.on_node(c, {.op = Op::kAllGather,
                .input = lane_blocks,
                .output = node_blocks,
                .count = c.count,
                .type = c.type,
                .recv_counts = counts.node.data(),
                .counts_digest = counts_digest(counts.node.data(), counts.node.size())});
  const std::vector<std::size_t> at = rank_starts(c, s.world_size());
  auto* out = static_cast<std::uint8_t*>(c.output);
  std::size_t got = 0;
  for (std::size_t k = 0; k < s.local_size(); ++k) {
    for (std::size_t j = 0; j < s.nodes(); ++j) {
      const auto rank = static_cast<std::size_t>(s.rank_at()[j][k]);
      const std::size_t bytes = c.recv_counts[rank] * es;
      if (bytes > 0) std::memcpy(out + at[rank] * es, node_blocks + got, bytes);
      got += bytes;
    }
  }
}

// Inside the node first, over the input regrouped [local index][node] in the stage type: local
// rank i is left the node's sums of every node's rank i's blocks, which the lane then
// reduce-scatters. One rounding at the end.
void hier_reduce_scatterv(HierStages& s, const Call& c) {
  const std::size_t es = size_of(c.type);
  const DataType st = stage_type(c.type);
  const std::size_t ses = size_of(st);
  const ReduceOp op = c.reduce == ReduceOp::kAvg ? ReduceOp::kSum : c.reduce;
  const StageCounts counts = stage_counts(s, c);
  const std::vector<std::size_t> at = rank_starts(c, s.world_size());
  std::uint8_t* by_lane = s.scratch(Scratch::kWide, c.count * ses);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  std::size_t put = 0;
  for (std::size_t k = 0; k < s.local_size(); ++k) {
    for (std::size_t j = 0; j < s.nodes(); ++j) {
      const auto rank = static_cast<std::size_t>(s.rank_at()[j][k]);
      widen(in + at[rank] * es, c.type, c.recv_counts[rank], by_lane + put * ses);
      put += c.recv_counts[rank];
    }
  }
  const std::size_t lane_total = sum_of(counts.lane.data(), static_cast<int>(s.nodes()));
  std::uint8_t* lane_sums = s.scratch(Scratch::kWideMine, lane_total * ses);
  s.on_node(c, {.op = Op::kReduceScatter,
                .input = by_lane,
                .output = lane_sums,
                .count = c.count,
                .type = st,
                .reduce = op,
                .recv_counts = counts.node.data(),
                .counts_digest = counts_digest(counts.node.data(), counts.node.size())});
  const std::size_t mine_count = counts.lane[s.node_index()];
  std::uint8_t* mine = s.scratch(Scratch::kWide, mine_count * ses);  // by_lane is read: reused
  s.on_lane(c, {.op = Op::kReduceScatter,
                .input = lane_sums,
                .output = mine,
                .count = lane_total,
                .type = st,
                .reduce = op,
                .recv_counts = counts.lane.data(),
                .counts_digest = counts_digest(counts.lane.data(), counts.lane.size())});
  if (c.reduce == ReduceOp::kAvg) {
    auto* values = reinterpret_cast<float*>(mine);
    const auto w = static_cast<float>(s.world_size());
    for (std::size_t i = 0; i < mine_count; ++i) values[i] /= w;
  }
  narrow(mine, c.type, mine_count, c.output);
}

}  // namespace tpcomm::transport
