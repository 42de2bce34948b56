// The bookkeeping of sharing graph buffers that live in VMM memory, kept apart from CUDA so that
// it runs in the host tests: buffers grouped by the allocation that holds them (one descriptor
// per allocation, not per captured call), a round's descriptors split into messages of at most
// kMaxHandleSet (one SCM_RIGHTS message each), the receiver's reassembly of a peer's messages,
// and the key under which a peer's allocation is imported.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/cuda/fd_channel.hpp"

namespace tpcomm::transport::cuda {

// The allocation that holds a buffer, as cuMemGetAddressRange reports it.
struct AllocationRange {
  std::uint64_t base = 0;
  std::uint64_t size = 0;
  bool operator==(const AllocationRange&) const = default;
};

// Distinct allocations in the order they are first met, and each buffer's index among them.
struct AllocationGroups {
  std::vector<AllocationRange> allocations;
  std::vector<std::uint32_t> of_buffer;
};
AllocationGroups group_by_allocation(const std::vector<AllocationRange>& holding_buffer);

// The allocations a rank sends in one round: the distinct indices of `used` (the allocation of
// each buffer that every rank shares as VMM memory), ascending. Every rank computes each peer's
// list from the gathered descriptions, so the i-th descriptor received is that list's i-th.
std::vector<std::uint32_t> allocations_to_send(const std::vector<std::uint32_t>& used);

// Where allocation `allocation` sits in `sent` (allocations_to_send of that rank); throws
// kMismatch when it is not there.
std::size_t position_in(const std::vector<std::uint32_t>& sent, std::uint32_t allocation);

// Message `index` of a set of `total` descriptors carries [first, first + count).
struct Chunk {
  std::uint32_t index = 0;
  std::uint32_t chunks = 1;  // how many messages the set takes
  std::uint32_t first = 0;
  std::uint32_t count = 0;
};
// The messages of a set of `total` descriptors: ceil(total / per_message), at least one (an empty
// set is still one message, so the receiver hears from every peer each round).
std::vector<Chunk> split_into_chunks(std::size_t total, std::size_t per_message = kMaxHandleSet);

// More descriptors than any round can need (a peer claiming more is refused before anything is
// allocated for them).
constexpr std::uint64_t kMaxRoundDescriptors = std::uint64_t{1} << 20;

// A peer's set of one round, rebuilt from its messages in any order. Every message must be one
// that split_into_chunks(total) gives: an index out of range, a message twice, a count or offset
// that disagrees, or (at take()) a message missing is a kMismatch naming the rank and round.
class ChunkAssembly {
 public:
  ChunkAssembly(int from, std::uint32_t round, std::uint64_t total);
  void add(const Chunk& chunk, std::vector<net::Fd> fds, std::vector<std::uint64_t> sizes);
  bool complete() const { return received_ == expected_.size(); }
  HandleSet take();

 private:
  std::string what() const;
  int from_;
  std::uint32_t round_;
  std::vector<Chunk> expected_;
  std::vector<bool> seen_;
  std::size_t received_ = 0;
  HandleSet set_;
};

// Under which key a peer's VMM allocation is imported. A descriptor carries no identity and a VMM
// allocator remaps new memory at the same address (PyTorch's expandable segments), so the peer's
// address cannot be the key: an import serves the round (registration) that received it, where
// the sender's allocation index names one allocation.
struct VmmImportKey {
  int rank = 0;
  std::uint32_t round = 0;
  std::uint64_t allocation = 0;
  auto operator<=>(const VmmImportKey&) const = default;
};
VmmImportKey vmm_import_key(int rank, std::uint32_t round, std::uint64_t their_base,
                            std::uint32_t allocation);

}  // namespace tpcomm::transport::cuda
