// The shm backend's copies and reductions split over a rank's thread team (team/thread_team.hpp):
// the elements are cut into chunks (about kChunksPerThread per thread) that the threads take in
// turn from a shared counter, so a thread on a faster or less busy core takes more of them and the
// call ends when the work does, not when the slowest core's equal share does (the two vCPUs of the
// development VM ran the same L1-resident loop 1.4-3x apart,
// docs/results/cpu-2026-12-03-small-calls.md). The kernels compute every element the same way
// wherever it lies (reduce.hpp), so a result is bitwise the same for every thread count and
// every order of taking; chunks start at multiples of kShareAlign elements all the same, so that no
// chunk splits a vector's or a bf16 pair's elements from the rest, and no cache line of the output
// is written by two threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tpcomm/rmsnorm.hpp"
#include "tpcomm/types.hpp"
#include "transport/cpu/kernel_choice.hpp"
#include "transport/cpu/thread_team.hpp"

namespace tpcomm::transport::cpu {

constexpr std::size_t kShareAlign = 64;           // elements
constexpr std::size_t kMinShareBytes = 16 << 10;  // below this a share is not worth a thread
constexpr int kChunksPerThread = 8;
constexpr std::size_t kMinChunkBytes = 16 << 10;  // taking a chunk costs a shared counter's line

// How many of `team_size` threads share `bytes` of work: each gets at least kMinShareBytes.
int share_count(std::size_t bytes, int team_size);

// The chunks of [0, n) for `parts` threads: every chunk but the last `size` units long, size a
// multiple of `align` and at least `min_units` (rounded up to align), about kChunksPerThread per
// thread.
struct Chunks {
  std::size_t size = 0;
  std::size_t count = 0;
};
Chunks chunks_for(std::size_t n, int parts, std::size_t align, std::size_t min_units);

// Runs fn(part, first, count) over the chunks of [0, n) on `parts` threads of `team` (part 0 the
// caller), each thread taking the next chunk until none is left.
void run_chunks(ThreadTeam& team, int parts, std::size_t n, std::size_t align,
                std::size_t min_units,
                const std::function<void(int, std::size_t, std::size_t)>& fn);

// reduce_slots (of variant `isa`) over the team; `team` null: the caller alone. Groups of more
// than kMaxTeamRanks ranks reduce on the caller alone.
constexpr int kMaxTeamRanks = 64;
void team_reduce(ThreadTeam* team, KernelIsa isa, const void* const* srcs, int ranks,
                 std::size_t count, DataType type, ReduceOp op, void* out);
inline void team_reduce(ThreadTeam* team, const void* const* srcs, int ranks, std::size_t count,
                        DataType type, ReduceOp op, void* out) {
  team_reduce(team, chosen_kernel_isa(), srcs, ranks, count, type, op, out);
}

// add_rmsnorm_rows_with (kernels/cpu/add_rmsnorm.hpp) over the team, whole rows to a thread
// (the kernel gives every row the same bits wherever it runs); `team` null: the caller alone.
void team_add_rmsnorm(ThreadTeam* team, const void* const* srcs, int ranks, std::size_t rows,
                      DataType type, const RmsNorm& norm, void* out);

// read_peer_memory (single_copy.hpp) over the team: a kUnavailable of any share is thrown here.
void team_read_peer(ThreadTeam* team, int peer, int pid, std::uint64_t address, void* to,
                    std::size_t bytes);

// memcpy, or streaming_copy when `streaming`, over the team.
void team_copy(ThreadTeam* team, void* to, const void* from, std::size_t bytes,
               bool streaming = false);

}  // namespace tpcomm::transport::cpu
