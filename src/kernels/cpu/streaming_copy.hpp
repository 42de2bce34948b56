// A copy whose destination bypasses the caches (non-temporal stores), for shm's all-gather to
// place a rank's own block in a large output: with both ranks of a W = 2 group copying megabytes
// at once, cached stores first read every destination line and evict the lines the peer reads
// next; streaming stores do neither (2-vCPU EPYC, W = 2: 16 MiB all-gather 1870 -> 1570 us, Open
// MPI 1800-1900; 8 MiB 630-675 against MPI's 850-970). From a 2 MiB block it was slower
// (4 MiB all-gather 220 -> 275 us): below kStreamingCopyMinBytes the output stays in cache.
#pragma once

#include <cstddef>

namespace tpcomm::kernels::cpu {

constexpr std::size_t kStreamingCopyMinBytes = 4 << 20;

// memcpy's contract (no overlap), any alignment; ends with a store fence, so the bytes are
// visible to other threads as a plain memcpy's are once the caller publishes them.
void streaming_copy(void* to, const void* from, std::size_t bytes);

// A block into an all-gather output: memcpy, or streaming_copy for the rank's own block (`own`)
// from kStreamingCopyMinBytes. Returns `to`, as memcpy does.
void* copy_block(void* to, const void* from, std::size_t bytes, bool own);

}  // namespace tpcomm::kernels::cpu
