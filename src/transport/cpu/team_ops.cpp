// Splitting a copy or a reduction into chunks the team's threads take in turn.
#include "team_ops.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/add_rmsnorm.hpp"
#include "kernels/cpu/streaming_copy.hpp"
#include "single_copy.hpp"

namespace tpcomm::transport::cpu {

int share_count(std::size_t bytes, int team_size) {
  const std::size_t most = bytes / kMinShareBytes;
  return static_cast<int>(std::clamp<std::size_t>(most, 1, static_cast<std::size_t>(team_size)));
}

Chunks chunks_for(std::size_t n, int parts, std::size_t align, std::size_t min_units) {
  if (n == 0) return {};
  const auto wanted = static_cast<std::size_t>(std::max(parts, 1) * kChunksPerThread);
  std::size_t size = std::max((n + wanted - 1) / wanted, std::max<std::size_t>(min_units, 1));
  size = (size + align - 1) / align * align;
  return {size, (n + size - 1) / size};
}

void run_chunks(ThreadTeam& team, int parts, std::size_t n, std::size_t align,
                std::size_t min_units,
                const std::function<void(int, std::size_t, std::size_t)>& fn) {
  const Chunks c = chunks_for(n, parts, align, min_units);
  // Its own cache line: every take is a round trip of this line between the cores.
  struct alignas(64) Counter {
    std::atomic<std::size_t> next{0};
  } taken;
  team.run(parts, [&](int part) {
    for (std::size_t i = taken.next.fetch_add(1, std::memory_order_relaxed); i < c.count;
         i = taken.next.fetch_add(1, std::memory_order_relaxed)) {
      const std::size_t first = i * c.size;
      fn(part, first, std::min(c.size, n - first));
    }
  });
}

void team_reduce(ThreadTeam* team, KernelIsa isa, const void* const* srcs, int ranks,
                 std::size_t count, DataType type, ReduceOp op, void* out) {
  const std::size_t es = size_of(type);
  const int parts = team == nullptr || ranks > kMaxTeamRanks
                        ? 1
                        : share_count(count * es * static_cast<std::size_t>(ranks), team->size());
  if (parts == 1) return reduce_slots_with(isa, srcs, ranks, count, type, op, out);
  const std::size_t min_units = kMinChunkBytes / (es * static_cast<std::size_t>(ranks));
  run_chunks(*team, parts, count, kShareAlign, min_units,
             [&](int, std::size_t first, std::size_t n) {
               const void* mine[kMaxTeamRanks];
               for (int r = 0; r < ranks; ++r)
                 mine[r] = static_cast<const std::uint8_t*>(srcs[r]) + first * es;
               reduce_slots_with(isa, mine, ranks, n, type, op,
                                 static_cast<std::uint8_t*>(out) + first * es);
             });
}

void team_add_rmsnorm(ThreadTeam* team, const void* const* srcs, int ranks, std::size_t rows,
                      DataType type, const RmsNorm& norm, void* out) {
  const std::size_t row_bytes = norm.hidden * size_of(type);
  const auto ur = static_cast<std::size_t>(ranks);
  const int parts = team == nullptr || ranks > kMaxTeamRanks
                        ? 1
                        : share_count(rows * row_bytes * ur, team->size());
  const KernelIsa isa = chosen_kernel_isa();
  if (parts == 1) {
    return kernels::cpu::add_rmsnorm_rows_with(isa, srcs, ranks, type, rows, type, norm, out);
  }
  const std::size_t min_rows = std::max<std::size_t>(1, kMinChunkBytes / (row_bytes * ur));
  run_chunks(*team, parts, rows, 1, min_rows, [&](int, std::size_t first, std::size_t n) {
    const std::size_t at = first * row_bytes;
    const void* mine[kMaxTeamRanks];
    for (int r = 0; r < ranks; ++r) mine[r] = static_cast<const std::uint8_t*>(srcs[r]) + at;
    RmsNorm part = norm;
    if (norm.residual) part.residual = static_cast<const std::uint8_t*>(norm.residual) + at;
    if (norm.residual_out) part.residual_out = static_cast<std::uint8_t*>(norm.residual_out) + at;
    kernels::cpu::add_rmsnorm_rows_with(isa, mine, ranks, type, n, type, part,
                                        static_cast<std::uint8_t*>(out) + at);
  });
}

void team_read_peer(ThreadTeam* team, int peer, int pid, std::uint64_t address, void* to,
                    std::size_t bytes) {
  const int parts = team == nullptr ? 1 : share_count(bytes, team->size());
  if (parts == 1) return read_peer_memory(peer, pid, address, to, bytes);
  run_chunks(*team, parts, bytes, 64, kMinChunkBytes, [&](int, std::size_t first, std::size_t n) {
    read_peer_memory(peer, pid, address + first, static_cast<std::uint8_t*>(to) + first, n);
  });
}

void team_copy(ThreadTeam* team, void* to, const void* from, std::size_t bytes, bool streaming) {
  auto copy = [streaming](void* t, const void* f, std::size_t n) {
    if (streaming) {
      kernels::cpu::streaming_copy(t, f, n);
    } else {
      std::memcpy(t, f, n);
    }
  };
  const int parts = team == nullptr ? 1 : share_count(bytes, team->size());
  if (parts == 1) return copy(to, from, bytes);
  run_chunks(*team, parts, bytes, 64, kMinChunkBytes, [&](int, std::size_t first, std::size_t n) {
    copy(static_cast<std::uint8_t*>(to) + first, static_cast<const std::uint8_t*>(from) + first, n);
  });
}

}  // namespace tpcomm::transport::cpu
