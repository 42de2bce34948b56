// hier's all-reduce, all-gather, reduce-scatter and reduce (hier_ops.hpp).
#include <algorithm>
#include <cstring>

#include "hier_blocks.hpp"
#include "hier_ops.hpp"
#include "hier_stage_type.hpp"

namespace tpcomm::transport {
namespace {

// The node stage's all-gather, as the built-in cpu table gathers (docs/tuning.md): each peer's
// slice read where it lies for two ranks per node above 16 KiB per rank (outputs above 32 KiB),
// else through the lanes. Every rank of a node gathers slices of the same size, so they all pick
// the same.
Algorithm node_gather_algorithm(std::size_t slice_bytes, std::size_t local_size) {
  return local_size == 2 && slice_bytes > (16 << 10) ? Algorithm::kSingleCopy : Algorithm::kOneShot;
}

// The node stage's all-gather of `count` elements per local rank.
void node_all_gather(HierStages& s, const Call& c, const void* input, void* output,
                     std::size_t count, DataType type) {
  s.on_node(c, {.op = Op::kAllGather,
                .input = input,
                .output = output,
                .count = count,
                .type = type,
                .algorithm = node_gather_algorithm(count * size_of(type), s.local_size())});
}

// Avg: floating-point calls only, so the stage buffer holds fp32.
void divide(const HierStages& s, std::uint8_t* stage, std::size_t count) {
  auto* values = reinterpret_cast<float*>(stage);
  const auto w = static_cast<float>(s.world_size());
  for (std::size_t i = 0; i < count; ++i) values[i] /= w;
}

ReduceOp stage_op(const Call& c) {
  return c.reduce == ReduceOp::kAvg ? ReduceOp::kSum : c.reduce;
}

// A reduce-scatter inside the node of the input (widened, the last slice padded with zeros):
// local rank i is left slice i, `per` elements in the stage type, in kWideMine; the whole
// widened input is in kWide.
std::uint8_t* node_reduce_scatter(HierStages& s, const Call& c, std::size_t per) {
  const DataType st = stage_type(c.type);
  const std::size_t ses = size_of(st);
  std::uint8_t* full = s.scratch(Scratch::kWide, per * s.local_size() * ses);
  std::uint8_t* mine = s.scratch(Scratch::kWideMine, per * ses);
  widen(c.input, c.type, c.count, full);
  std::fill(full + c.count * ses, full + per * s.local_size() * ses, 0);  // the padding
  s.on_node(c, {.op = Op::kReduceScatter,
                .input = full,
                .output = mine,
                .count = per,
                .type = st,
                .reduce = stage_op(c)});
  return mine;
}

std::size_t slice_of(const Call& c, const HierStages& s) {
  return (c.count + s.local_size() - 1) / s.local_size();
}

}  // namespace

// A reduce-scatter inside the node, an all-reduce of each 1/L slice along the lane, an
// all-gather inside the node; in the stage type throughout, one rounding at the end.
void hier_all_reduce(HierStages& s, const Call& c) {
  const std::size_t per = slice_of(c, s);
  const DataType st = stage_type(c.type);
  std::uint8_t* mine = node_reduce_scatter(s, c, per);
  s.on_lane(c, {.op = Op::kAllReduce,
                .input = mine,
                .output = mine,
                .count = per,
                .type = st,
                .reduce = stage_op(c)});
  std::uint8_t* full = s.scratch(Scratch::kWide, per * s.local_size() * size_of(st));
  node_all_gather(s, c, mine, full, per, st);
  if (c.reduce == ReduceOp::kAvg) divide(s, full, c.count);
  narrow(full, c.type, c.count, c.output);
}

// As the all-reduce, but each slice is reduced along the lane onto the root's node only, whose
// ranks then gather the slices onto the root: so 1/L of the input crosses between nodes per rank,
// in L lanes at once.
void hier_reduce(HierStages& s, const Call& c) {
  const std::size_t per = slice_of(c, s);
  const DataType st = stage_type(c.type);
  const std::size_t root_node = s.node_of(c.root);
  std::uint8_t* mine = node_reduce_scatter(s, c, per);
  s.on_lane(c, {.op = Op::kReduce,
                .input = mine,
                .output = mine,
                .count = per,
                .type = st,
                .reduce = stage_op(c),
                .root = static_cast<int>(root_node)});
  if (s.node_index() != root_node) return;
  const bool root = s.local_index() == s.local_of(c.root);
  std::uint8_t* full = s.scratch(Scratch::kWide, per * s.local_size() * size_of(st));
  s.on_node(c, {.op = Op::kGather,
                .input = mine,
                .output = root ? full : nullptr,
                .count = per,
                .type = st,
                .root = static_cast<int>(s.local_of(c.root))});
  if (!root) return;
  if (c.reduce == ReduceOp::kAvg) divide(s, full, c.count);
  narrow(full, c.type, c.count, c.output);
}

void hier_all_gather(HierStages& s, const Call& c) {
  hier_gather_blocks(s, c, c.input, c.output, c.count, c.type);
}

// Along the lane first: each rank's input crosses to the other nodes once ((N - 1) blocks per
// rank, the least any all-gather sends between nodes), then the node gathers its lanes' results
// over shm, and the blocks are put in rank order (nodes need not hold consecutive ranks).
void hier_gather_blocks(HierStages& s, const Call& outer, const void* input, void* output,
                        std::size_t count, DataType type) {
  const std::size_t block = count * size_of(type);
  // [node]: that node's rank of my lane
  std::uint8_t* lane_blocks = s.scratch(Scratch::kBytes, s.nodes() * block);
  // [local index][node]
  std::uint8_t* node_blocks = s.scratch(Scratch::kBytesNode, s.local_size() * s.nodes() * block);
  s.on_lane(
      outer,
      {.op = Op::kAllGather, .input = input, .output = lane_blocks, .count = count, .type = type});
  node_all_gather(s, outer, lane_blocks, node_blocks, s.nodes() * count, type);
  blocks_in_rank_order(node_blocks, static_cast<std::uint8_t*>(output), s.rank_at(), block);
}

// Inside the node first: local rank i is left the node's sum of the blocks of every node's rank
// i, then the lane reduce-scatters those, so only 1/L of the input crosses between nodes. In the
// stage type throughout, one rounding at the end.
void hier_reduce_scatter(HierStages& s, const Call& c) {
  const std::size_t n = s.nodes();
  const std::size_t l = s.local_size();
  const std::size_t es = size_of(c.type);
  const DataType st = stage_type(c.type);
  const std::size_t ses = size_of(st);
  // [local index][node]: the input, regrouped
  std::uint8_t* by_lane = s.scratch(Scratch::kWide, l * n * c.count * ses);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  for (std::size_t i = 0; i < l; ++i) {
    for (std::size_t node = 0; node < n; ++node) {
      const auto rank = static_cast<std::size_t>(s.rank_at()[node][i]);
      widen(in + rank * c.count * es, c.type, c.count, by_lane + (i * n + node) * c.count * ses);
    }
  }
  std::uint8_t* lane_sums = s.scratch(Scratch::kWideMine, n * c.count * ses);
  s.on_node(c, {.op = Op::kReduceScatter,
                .input = by_lane,
                .output = lane_sums,
                .count = n * c.count,
                .type = st,
                .reduce = stage_op(c)});
  std::uint8_t* mine = s.scratch(Scratch::kWide, c.count * ses);  // by_lane is read: reused
  s.on_lane(c, {.op = Op::kReduceScatter,
                .input = lane_sums,
                .output = mine,
                .count = c.count,
                .type = st,
                .reduce = stage_op(c)});
  if (c.reduce == ReduceOp::kAvg) divide(s, mine, c.count);
  narrow(mine, c.type, c.count, c.output);
}

}  // namespace tpcomm::transport
