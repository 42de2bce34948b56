// Splitting a copy or a reduction into the team's shares.
#include "shm_team_ops.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "single_copy.hpp"
#include "streaming_copy.hpp"

namespace tpcomm::transport::shm {

int share_count(std::size_t bytes, int team_size) {
  const std::size_t most = bytes / kMinShareBytes;
  return static_cast<int>(std::clamp<std::size_t>(most, 1, static_cast<std::size_t>(team_size)));
}

std::pair<std::size_t, std::size_t> share_of(std::size_t n, int parts, int part,
                                             std::size_t align) {
  const std::size_t units = (n + align - 1) / align;
  const auto p = static_cast<std::size_t>(part);
  const auto ps = static_cast<std::size_t>(parts);
  const std::size_t first = std::min(n, units * p / ps * align);
  const std::size_t end = std::min(n, units * (p + 1) / ps * align);
  return {first, end - first};
}

void team_reduce(ThreadTeam* team, KernelIsa isa, const void* const* srcs, int ranks,
                 std::size_t count, DataType type, ReduceOp op, void* out) {
  const std::size_t es = size_of(type);
  const int parts = team == nullptr || ranks > kMaxTeamRanks
                        ? 1
                        : share_count(count * es * static_cast<std::size_t>(ranks), team->size());
  if (parts == 1) return reduce_slots_with(isa, srcs, ranks, count, type, op, out);
  team->run(parts, [&](int part) {
    const auto [first, n] = share_of(count, parts, part, kShareAlign);
    if (n == 0) return;
    const void* mine[kMaxTeamRanks];
    for (int r = 0; r < ranks; ++r)
      mine[r] = static_cast<const std::uint8_t*>(srcs[r]) + first * es;
    reduce_slots_with(isa, mine, ranks, n, type, op, static_cast<std::uint8_t*>(out) + first * es);
  });
}

void team_read_peer(ThreadTeam* team, int peer, int pid, std::uint64_t address, void* to,
                    std::size_t bytes) {
  const int parts = team == nullptr ? 1 : share_count(bytes, team->size());
  if (parts == 1) return read_peer_memory(peer, pid, address, to, bytes);
  team->run(parts, [&](int part) {
    const auto [first, n] = share_of(bytes, parts, part, 64);
    if (n > 0)
      read_peer_memory(peer, pid, address + first, static_cast<std::uint8_t*>(to) + first, n);
  });
}

void team_copy(ThreadTeam* team, void* to, const void* from, std::size_t bytes, bool streaming) {
  auto copy = [streaming](void* t, const void* f, std::size_t n) {
    if (streaming) {
      streaming_copy(t, f, n);
    } else {
      std::memcpy(t, f, n);
    }
  };
  const int parts = team == nullptr ? 1 : share_count(bytes, team->size());
  if (parts == 1) return copy(to, from, bytes);
  team->run(parts, [&](int part) {
    const auto [first, n] = share_of(bytes, parts, part, 64);
    if (n > 0)
      copy(static_cast<std::uint8_t*>(to) + first, static_cast<const std::uint8_t*>(from) + first,
           n);
  });
}

}  // namespace tpcomm::transport::shm
