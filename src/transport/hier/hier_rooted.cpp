// hier's gather and scatter (hier_ops.hpp): inside each node onto (or from) the rank with the
// root's local index, and along that rank's lane onto (or from) the root's node, so each node's
// blocks cross between nodes once, together.
#include "hier_blocks.hpp"
#include "hier_ops.hpp"

namespace tpcomm::transport {

void hier_gather(HierStages& s, const Call& c) {
  const std::size_t block = c.count * size_of(c.type);
  const int root_local = static_cast<int>(s.local_of(c.root));
  const bool on_root_lane = s.local_index() == s.local_of(c.root);
  // [local index]: this node's blocks, on the root's lane
  std::uint8_t* node_blocks = s.scratch(Scratch::kBytes, s.local_size() * block);
  s.on_node(c, {.op = Op::kGather,
                .input = c.input,
                .output = on_root_lane ? node_blocks : nullptr,
                .count = c.count,
                .type = c.type,
                .root = root_local});
  if (!on_root_lane) return;
  const bool root = s.node_index() == s.node_of(c.root);
  // [node][local index], on the root
  std::uint8_t* all = s.scratch(Scratch::kBytesNode, s.world_size() * block);
  s.on_lane(c, {.op = Op::kGather,
                .input = node_blocks,
                .output = root ? all : nullptr,
                .count = s.local_size() * c.count,
                .type = c.type,
                .root = static_cast<int>(s.node_of(c.root))});
  if (root) blocks_from_node_order(all, static_cast<std::uint8_t*>(c.output), s.rank_at(), block);
}

void hier_scatter(HierStages& s, const Call& c) {
  const std::size_t block = c.count * size_of(c.type);
  const int root_local = static_cast<int>(s.local_of(c.root));
  const bool on_root_lane = s.local_index() == s.local_of(c.root);
  // [local index]: this node's blocks, on the root's lane
  std::uint8_t* node_blocks = s.scratch(Scratch::kBytes, s.local_size() * block);
  if (on_root_lane) {
    const bool root = s.node_index() == s.node_of(c.root);
    // [node][local index], on the root
    std::uint8_t* by_node = s.scratch(Scratch::kBytesNode, s.world_size() * block);
    if (root) {
      blocks_by_node(static_cast<const std::uint8_t*>(c.input), by_node, s.rank_at(), block);
    }
    s.on_lane(c, {.op = Op::kScatter,
                  .input = root ? by_node : nullptr,
                  .output = node_blocks,
                  .count = s.local_size() * c.count,
                  .type = c.type,
                  .root = static_cast<int>(s.node_of(c.root))});
  }
  s.on_node(c, {.op = Op::kScatter,
                .input = on_root_lane ? node_blocks : nullptr,
                .output = c.output,
                .count = c.count,
                .type = c.type,
                .root = root_local});
}

}  // namespace tpcomm::transport
