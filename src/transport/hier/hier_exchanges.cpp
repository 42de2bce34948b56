// hier's all_to_all and all_to_allv (hier_ops.hpp): two exchanges, along the lane first, each
// rank sending every other node the blocks for that node's ranks (so every block crosses between
// nodes once, in one message per pair of nodes), then inside the node, each rank handing every
// local rank the blocks its lane brought for it; then the blocks in rank order.
#include <cstring>
#include <vector>

#include "hier_blocks.hpp"
#include "hier_ops.hpp"
#include "transport/common/all_to_allv_counts.hpp"

namespace tpcomm::transport {
namespace {

// Every rank's send counts, then its receive counts (2 W each), gathered by hier's own
// all-gather and checked pair by pair on every rank (all_to_allv_counts.hpp).
std::vector<std::uint64_t> checked_counts(HierStages& s, const Call& c) {
  const std::size_t w = s.world_size();
  std::vector<std::uint64_t> mine(2 * w), all(2 * w * w);
  for (std::size_t r = 0; r < w; ++r) {
    mine[r] = c.send_counts[r];
    mine[w + r] = c.recv_counts[r];
  }
  hier_gather_blocks(s, c, mine.data(), all.data(), 2 * w, DataType::kInt64);
  check_all_to_allv_counts(all.data(), w, c);
  return all;
}

// Where each rank's block starts in a buffer of blocks in rank order, in bytes.
std::vector<std::size_t> starts_of(const std::size_t* counts, std::size_t w, std::size_t es) {
  std::vector<std::size_t> at(w + 1, 0);
  for (std::size_t r = 0; r < w; ++r) at[r + 1] = at[r] + counts[r] * es;
  return at;
}

// Blocks [starts[b], starts[b + 1]) of `in`, block order[0] first, back to back into `out`.
void pack(const std::uint8_t* in, const std::vector<std::size_t>& starts,
          const std::vector<std::size_t>& order, std::uint8_t* out) {
  for (std::size_t b : order) {
    const std::size_t bytes = starts[b + 1] - starts[b];
    if (bytes > 0) std::memcpy(out, in + starts[b], bytes);
    out += bytes;
  }
}
// The reverse: `in` holds the blocks back to back in `order`; each goes to its place in `out`.
void unpack(const std::uint8_t* in, const std::vector<std::size_t>& order,
            const std::vector<std::size_t>& starts, std::uint8_t* out) {
  for (std::size_t b : order) {
    const std::size_t bytes = starts[b + 1] - starts[b];
    if (bytes > 0) std::memcpy(out + starts[b], in, bytes);
    in += bytes;
  }
}

}  // namespace

void hier_all_to_all(HierStages& s, const Call& c) {
  const std::size_t n = s.nodes();
  const std::size_t l = s.local_size();
  const std::size_t block = c.count * size_of(c.type);
  std::uint8_t* by_node = s.scratch(Scratch::kBytes, n * l * block);  // [node][local index]
  blocks_by_node(static_cast<const std::uint8_t*>(c.input), by_node, s.rank_at(), block);
  // [node][local index]: from my lane's rank on that node, its block for that local rank here.
  std::uint8_t* from_lane = s.scratch(Scratch::kBytesNode, n * l * block);
  s.on_lane(c, {.op = Op::kAllToAll,
                .input = by_node,
                .output = from_lane,
                .count = l * c.count,
                .type = c.type});
  std::uint8_t* by_local = s.scratch(Scratch::kWide, l * n * block);  // [local index][node]
  transpose_blocks(from_lane, by_local, n, l, block);
  // [local index][node]: the block of rank (node, local index) for this rank.
  std::uint8_t* mine = s.scratch(Scratch::kWideMine, l * n * block);
  s.on_node(c, {.op = Op::kAllToAll,
                .input = by_local,
                .output = mine,
                .count = n * c.count,
                .type = c.type});
  blocks_in_rank_order(mine, static_cast<std::uint8_t*>(c.output), s.rank_at(), block);
}

// The same with every rank's counts, known everywhere once gathered (checked_counts): the lane
// carries, from rank (j, i) to this rank's node, its blocks for each local rank k in turn; the
// node exchange hands local rank k those blocks of every node j, in node order.
void hier_all_to_allv(HierStages& s, const Call& c) {
  const std::size_t n = s.nodes();
  const std::size_t l = s.local_size();
  const std::size_t w = s.world_size();
  const std::size_t es = size_of(c.type);
  const std::vector<std::uint64_t> all = checked_counts(s, c);
  const auto sends = [&](int from, int to) {
    return static_cast<std::size_t>(
        all[static_cast<std::size_t>(from) * 2 * w + static_cast<std::size_t>(to)]);
  };
  const RankAt& at = s.rank_at();
  const std::vector<std::size_t> in_at = starts_of(c.send_counts, w, es);
  const std::vector<std::size_t> out_at = starts_of(c.recv_counts, w, es);
  // The lane's counts: to node j, my blocks for its ranks; from node j, its lane rank's blocks
  // for this node's ranks.
  std::vector<std::size_t> lane_sends(n, 0), lane_receives(n, 0);
  std::vector<std::size_t> node_sends(l, 0), node_receives(l, 0);
  for (std::size_t j = 0; j < n; ++j) {
    const int lane_peer = at[j][s.local_index()];
    for (std::size_t k = 0; k < l; ++k) {
      lane_sends[j] += c.send_counts[static_cast<std::size_t>(at[j][k])];
      const std::size_t brought = sends(lane_peer, at[s.node_index()][k]);
      lane_receives[j] += brought;
      node_sends[k] += brought;
      node_receives[k] += c.recv_counts[static_cast<std::size_t>(at[j][k])];
    }
  }
  // Rank order to [node][local index], for the lane.
  std::vector<std::size_t> node_order, local_order, ranks_by_local;
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t k = 0; k < l; ++k) node_order.push_back(static_cast<std::size_t>(at[j][k]));
  }
  for (std::size_t k = 0; k < l; ++k) {
    for (std::size_t j = 0; j < n; ++j) {
      local_order.push_back(j * l + k);
      ranks_by_local.push_back(static_cast<std::size_t>(at[j][k]));
    }
  }
  std::uint8_t* by_node = s.scratch(Scratch::kBytes, in_at[w]);
  pack(static_cast<const std::uint8_t*>(c.input), in_at, node_order, by_node);
  std::vector<std::size_t> from_at(n * l + 1, 0);  // [node][local index]: what the lane brought
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t k = 0; k < l; ++k) {
      from_at[j * l + k + 1] =
          from_at[j * l + k] + sends(at[j][s.local_index()], at[s.node_index()][k]) * es;
    }
  }
  std::uint8_t* from_lane = s.scratch(Scratch::kBytesNode, from_at.back());
  s.on_lane(c, {.op = Op::kAllToAll,
                .input = by_node,
                .output = from_lane,
                .type = c.type,
                .send_counts = lane_sends.data(),
                .recv_counts = lane_receives.data()});
  // [local index][node]: the blocks for local rank k, node after node.
  std::uint8_t* by_local = s.scratch(Scratch::kWide, from_at.back());
  pack(from_lane, from_at, local_order, by_local);
  // [local index][node]: the block of rank (node, local index) for this rank.
  std::uint8_t* mine = s.scratch(Scratch::kWideMine, out_at[w]);
  s.on_node(c, {.op = Op::kAllToAll,
                .input = by_local,
                .output = mine,
                .type = c.type,
                .send_counts = node_sends.data(),
                .recv_counts = node_receives.data()});
  unpack(mine, ranks_by_local, out_at, static_cast<std::uint8_t*>(c.output));
}

}  // namespace tpcomm::transport
