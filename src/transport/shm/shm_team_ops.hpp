// The shm backend's copies and reductions split over a rank's thread team (team/thread_team.hpp):
// each thread takes one contiguous share of the elements. The kernels compute every element
// the same way wherever it lies (shm_reduce.hpp), so a result is bitwise the same for every
// thread count; shares start at multiples of kShareAlign elements all the same, so that no
// share splits a vector's or a bf16 pair's elements from the rest, and no cache line of the
// output is written by two threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "shm_reduce.hpp"
#include "tpcomm/types.hpp"
#include "transport/team/thread_team.hpp"

namespace tpcomm::transport::shm {

constexpr std::size_t kShareAlign = 64;           // elements
constexpr std::size_t kMinShareBytes = 16 << 10;  // below this a share is not worth a thread

// How many of `team_size` threads share `bytes` of work: each gets at least kMinShareBytes.
int share_count(std::size_t bytes, int team_size);

// Part `part` of `parts` of [0, n): {first, count}, first a multiple of `align`.
std::pair<std::size_t, std::size_t> share_of(std::size_t n, int parts, int part, std::size_t align);

// reduce_slots (of variant `isa`) over the team; `team` null: the caller alone. Groups of more
// than kMaxTeamRanks ranks reduce on the caller alone.
constexpr int kMaxTeamRanks = 64;
void team_reduce(ThreadTeam* team, KernelIsa isa, const void* const* srcs, int ranks,
                 std::size_t count, DataType type, ReduceOp op, void* out);
inline void team_reduce(ThreadTeam* team, const void* const* srcs, int ranks, std::size_t count,
                        DataType type, ReduceOp op, void* out) {
  team_reduce(team, best_kernel_isa(), srcs, ranks, count, type, op, out);
}

// read_peer_memory (single_copy.hpp) over the team: a kUnavailable of any share is thrown here.
void team_read_peer(ThreadTeam* team, int peer, int pid, std::uint64_t address, void* to,
                    std::size_t bytes);

// memcpy, or streaming_copy when `streaming`, over the team.
void team_copy(ThreadTeam* team, void* to, const void* from, std::size_t bytes,
               bool streaming = false);

}  // namespace tpcomm::transport::shm
