// Grouping, chunking and reassembly of a round's VMM descriptors (handle_chunks.hpp).
#include "handle_chunks.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport::cuda {

AllocationGroups group_by_allocation(const std::vector<AllocationRange>& holding_buffer) {
  AllocationGroups g;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint32_t> index;
  g.of_buffer.reserve(holding_buffer.size());
  for (const AllocationRange& a : holding_buffer) {
    const auto [it, is_new] =
        index.emplace(std::pair{a.base, a.size}, static_cast<std::uint32_t>(g.allocations.size()));
    if (is_new) g.allocations.push_back(a);
    g.of_buffer.push_back(it->second);
  }
  return g;
}

std::vector<std::uint32_t> allocations_to_send(const std::vector<std::uint32_t>& used) {
  std::vector<std::uint32_t> sent = used;
  std::sort(sent.begin(), sent.end());
  sent.erase(std::unique(sent.begin(), sent.end()), sent.end());
  return sent;
}

std::size_t position_in(const std::vector<std::uint32_t>& sent, std::uint32_t allocation) {
  const auto it = std::lower_bound(sent.begin(), sent.end(), allocation);
  if (it == sent.end() || *it != allocation) {
    throw Error(ErrorCode::kMismatch, fmt::format("allocation {} is not among the {} a peer sent",
                                                  allocation, sent.size()));
  }
  return static_cast<std::size_t>(it - sent.begin());
}

std::vector<Chunk> split_into_chunks(std::size_t total, std::size_t per_message) {
  std::vector<Chunk> chunks;
  const std::size_t n = std::max<std::size_t>(1, (total + per_message - 1) / per_message);
  for (std::size_t i = 0; i < n; ++i) {
    Chunk c;
    c.index = static_cast<std::uint32_t>(i);
    c.chunks = static_cast<std::uint32_t>(n);
    c.first = static_cast<std::uint32_t>(i * per_message);
    c.count = static_cast<std::uint32_t>(std::min(per_message, total - i * per_message));
    chunks.push_back(c);
  }
  return chunks;
}

ChunkAssembly::ChunkAssembly(int from, std::uint32_t round, std::uint64_t total)
    : from_(from), round_(round) {
  if (total > kMaxRoundDescriptors) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("rank {}'s buffer handles of round {}: {} descriptors, more than any "
                            "round can hold ({})",
                            from, round, total, kMaxRoundDescriptors));
  }
  expected_ = split_into_chunks(total);
  seen_.assign(expected_.size(), false);
  set_.fds.resize(total);
  set_.sizes.resize(total);
}

std::string ChunkAssembly::what() const {
  return fmt::format("rank {}'s buffer handles of round {} ({} messages)", from_, round_,
                     expected_.size());
}

void ChunkAssembly::add(const Chunk& c, std::vector<net::Fd> fds,
                        std::vector<std::uint64_t> sizes) {
  if (c.index >= expected_.size() || c.chunks != expected_.size()) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("{}: a message numbered {} of {}", what(), c.index, c.chunks));
  }
  if (seen_[c.index]) {
    throw Error(ErrorCode::kMismatch, fmt::format("{}: message {} twice", what(), c.index));
  }
  const Chunk& want = expected_[c.index];
  if (c.first != want.first || c.count != want.count || fds.size() != want.count ||
      sizes.size() != want.count) {
    throw Error(
        ErrorCode::kMismatch,
        fmt::format("{}: message {} carries {} descriptors ({} sizes) from {}, expected "
                    "{} from {}",
                    what(), c.index, fds.size(), sizes.size(), c.first, want.count, want.first));
  }
  for (std::size_t k = 0; k < fds.size(); ++k) {
    set_.fds[want.first + k] = std::move(fds[k]);
    set_.sizes[want.first + k] = sizes[k];
  }
  seen_[c.index] = true;
  ++received_;
}

HandleSet ChunkAssembly::take() {
  if (!complete()) {
    std::string missing;
    for (std::size_t i = 0; i < seen_.size(); ++i) {
      if (!seen_[i]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", i);
    }
    throw Error(ErrorCode::kMismatch, fmt::format("{}: message(s) {} missing", what(), missing));
  }
  return std::move(set_);
}

VmmImportKey vmm_import_key(int rank, std::uint32_t round, std::uint64_t /*their_base*/,
                            std::uint32_t allocation) {
  return VmmImportKey{rank, round, allocation};
}

}  // namespace tpcomm::transport::cuda
