// hier's block moves (hier_blocks.hpp).
#include "hier_blocks.hpp"

#include <cstring>

namespace tpcomm::transport {

void blocks_by_node(const std::uint8_t* in, std::uint8_t* out, const RankAt& rank_at,
                    std::size_t block) {
  if (block == 0) return;
  std::size_t at = 0;
  for (const auto& node : rank_at) {
    for (int rank : node) {
      std::memcpy(out + at++ * block, in + static_cast<std::size_t>(rank) * block, block);
    }
  }
}

void blocks_from_node_order(const std::uint8_t* in, std::uint8_t* out, const RankAt& rank_at,
                            std::size_t block) {
  if (block == 0) return;
  std::size_t at = 0;
  for (const auto& node : rank_at) {
    for (int rank : node) {
      std::memcpy(out + static_cast<std::size_t>(rank) * block, in + at++ * block, block);
    }
  }
}

void transpose_blocks(const std::uint8_t* in, std::uint8_t* out, std::size_t rows, std::size_t cols,
                      std::size_t block) {
  if (block == 0) return;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      std::memcpy(out + (c * rows + r) * block, in + (r * cols + c) * block, block);
    }
  }
}

void blocks_in_rank_order(const std::uint8_t* in, std::uint8_t* out, const RankAt& rank_at,
                          std::size_t block) {
  if (block == 0 || rank_at.empty()) return;
  const std::size_t nodes = rank_at.size();
  for (std::size_t node = 0; node < nodes; ++node) {
    for (std::size_t i = 0; i < rank_at[node].size(); ++i) {
      const auto rank = static_cast<std::size_t>(rank_at[node][i]);
      std::memcpy(out + rank * block, in + (i * nodes + node) * block, block);
    }
  }
}

}  // namespace tpcomm::transport
