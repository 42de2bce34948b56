// What the custom kernels and the host agree on, written once for both (host/device functions):
// the workspace layout of one rank, the slice and chunk arithmetic, and the sequence-number rule
// of the signal pads. Compiled by nvcc into the kernels and by the host compiler into the backend
// and the unit tests, so the arithmetic the kernels use is the arithmetic the tests check.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TPCOMM_HD __host__ __device__ __forceinline__
#else
#define TPCOMM_HD inline
#endif

namespace tpcomm::kernels::cuda {

constexpr int kMaxRanks = 16;
constexpr int kMaxBlocks = 64;         // thread blocks of one custom kernel
constexpr std::size_t kVecBytes = 16;  // every rank moves 16-byte vectors

// One rank's workspace (a VMM allocation mapped by every peer):
//   [pads]   kPhases x kMaxBlocks x kMaxRanks 64-bit flags: peer p writes its step number into
//            my pad[phase][block][p]; numbers only grow, so a stale flag is never mistaken for a
//            current one and nothing is ever reset (graph replays included);
//   [steps]  this rank's last step number and a count of finished blocks (kept on the device
//            and advanced by the kernels, so a CUDA graph replay gets fresh numbers);
//   [failed] the group's failure word (kernel_codes.hpp), written by peers through their mappings;
//   [data]   two buffers used by step parity: the input of the current chunk (copied in), then
//            for two-shot the reduced slice.
constexpr int kPhases = 3;  // start, middle (two-shot), end
struct WorkspaceLayout {
  std::size_t pads_offset = 0;
  std::size_t steps_offset = 0;
  std::size_t failed_offset = 0;
  std::size_t data_offset = 0;
  std::size_t data_bytes = 0;
  std::size_t total_bytes = 0;
};

TPCOMM_HD std::size_t round_up(std::size_t v, std::size_t to) {
  return (v + to - 1) / to * to;
}

// `granularity`: the VMM allocation granularity (the total is a multiple of it).
TPCOMM_HD WorkspaceLayout workspace_layout(std::size_t data_bytes, std::size_t granularity) {
  WorkspaceLayout l;
  l.pads_offset = 0;
  const std::size_t pads = sizeof(std::uint64_t) * kPhases * kMaxBlocks * kMaxRanks;
  l.steps_offset = round_up(pads, 256);
  l.failed_offset = round_up(l.steps_offset + sizeof(std::uint64_t) * kMaxBlocks, 256);
  l.data_offset = round_up(l.failed_offset + sizeof(std::uint64_t), 4096);
  l.data_bytes = round_up(data_bytes, 4096);
  l.total_bytes = round_up(l.data_offset + l.data_bytes, granularity == 0 ? 1 : granularity);
  return l;
}

TPCOMM_HD std::size_t pad_index(int phase, int block, int from_rank) {
  return (static_cast<std::size_t>(phase) * kMaxBlocks + static_cast<std::size_t>(block)) *
             kMaxRanks +
         static_cast<std::size_t>(from_rank);
}

// A peer's flag says it reached step `step` once it holds at least that number.
TPCOMM_HD bool reached(std::uint64_t flag, std::uint64_t step) {
  return flag >= step;
}

// Half-open range [begin, end) of `n` items given to part `part` of `parts`: sizes differ by at
// most one and earlier parts get the larger ones, so every rank computes the same split.
struct Range {
  std::size_t begin = 0;
  std::size_t end = 0;
  TPCOMM_HD std::size_t size() const { return end - begin; }
};
TPCOMM_HD Range split(std::size_t n, int parts, int part) {
  const std::size_t base = n / static_cast<std::size_t>(parts);
  const std::size_t extra = n % static_cast<std::size_t>(parts);
  const auto p = static_cast<std::size_t>(part);
  Range r;
  r.begin = p * base + (p < extra ? p : extra);
  r.end = r.begin + base + (p < extra ? 1 : 0);
  return r;
}

// The same split in whole units of `unit` elements (a 16-byte vector): every boundary but the end
// is a multiple of `unit`, so a part that starts on an aligned address stays aligned and the
// kernels' 16-byte loads and stores cover all but the last part's tail.
TPCOMM_HD Range split_vectors(std::size_t n, int parts, int part, std::size_t unit) {
  const Range units = split((n + unit - 1) / unit, parts, part);
  Range r;
  r.begin = units.begin * unit < n ? units.begin * unit : n;
  r.end = units.end * unit < n ? units.end * unit : n;
  return r;
}

// Blocks for a message of `bytes` per rank: the plan's count, but no more than there are whole
// 512-thread rows of 16-byte vectors to give them (as vLLM clamps): a 2 KiB call on 36 blocks
// would make 35 of them wait at the barriers for nothing.
TPCOMM_HD int blocks_for(int requested, std::size_t bytes) {
  constexpr std::size_t kRowBytes = 512 * kVecBytes;
  const std::size_t useful = (bytes + kRowBytes - 1) / kRowBytes;
  const int wanted = requested < 1 ? 1 : requested;
  return useful < 1
             ? 1
             : (useful < static_cast<std::size_t>(wanted) ? static_cast<int>(useful) : wanted);
}

// Elements per chunk so that one chunk of the operation fits the data area: all-reduce and
// all-gather hold `count` elements per rank, reduce-scatter holds W blocks. Chunks are whole
// 16-byte vectors so every chunk but the last moves full vectors.
TPCOMM_HD std::size_t chunk_elements(std::size_t data_bytes, std::size_t element_bytes,
                                     int blocks_per_chunk_element) {
  const std::size_t per_vec = kVecBytes / element_bytes;
  std::size_t n = data_bytes / (element_bytes * static_cast<std::size_t>(blocks_per_chunk_element));
  n = n / per_vec * per_vec;
  return n == 0 ? per_vec : n;
}

// Number of chunks for `count` elements.
TPCOMM_HD std::size_t chunk_count(std::size_t count, std::size_t per_chunk) {
  return count == 0 ? 1 : (count + per_chunk - 1) / per_chunk;
}

// The world-size bucket a kernel is compiled for: parameters sized for 2, 4, 8 or 16 ranks.
TPCOMM_HD int world_bucket(int world) {
  return world <= 2 ? 2 : world <= 4 ? 4 : world <= 8 ? 8 : 16;
}

}  // namespace tpcomm::kernels::cuda
