// Moving blocks between rank order and hier's two stages' orders: by node (the lane's
// exchanges) and by local index (the node's). rank_at[node][local index] is the global rank.
// Every block holds `block` bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tpcomm::transport {

using RankAt = std::vector<std::vector<int>>;

// out[node][local index] = in[rank_at[node][local index]]: rank order to node order.
void blocks_by_node(const std::uint8_t* in, std::uint8_t* out, const RankAt& rank_at,
                    std::size_t block);
// out[local index][node] = in[node][local index]: node order to local order (and back, with
// the two counts swapped): a transpose of rows x cols blocks.
void transpose_blocks(const std::uint8_t* in, std::uint8_t* out, std::size_t rows, std::size_t cols,
                      std::size_t block);
// out[rank_at[node][local index]] = in[node][local index]: node order to rank order.
void blocks_from_node_order(const std::uint8_t* in, std::uint8_t* out, const RankAt& rank_at,
                            std::size_t block);
// out[rank_at[node][local index]] = in[local index][node]: local order to rank order.
void blocks_in_rank_order(const std::uint8_t* in, std::uint8_t* out, const RankAt& rank_at,
                          std::size_t block);

}  // namespace tpcomm::transport
