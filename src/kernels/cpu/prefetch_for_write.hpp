// Asks for cache lines in the state a write needs (exclusive to this core) ahead of the write,
// without waiting: x86's PREFETCHW (a no-op hint on CPUs that predate it), nothing elsewhere.
// shm's one-shot takes its next lane place this way (ShmBackend::take_next_place): a line the
// peer read last is shared with the peer, and a store to it stalls until the peer's copy is
// invalidated, on the critical path of the next call's fill and flag.
#pragma once

#include <cstddef>

namespace tpcomm::kernels::cpu {

inline void prefetch_for_write(const void* at, std::size_t bytes) {
#if defined(__x86_64__)
  const auto* p = static_cast<const char*>(at);
  for (std::size_t o = 0; o < bytes; o += 64) asm volatile("prefetchw %0" : : "m"(p[o]));
#else
  (void)at;
  (void)bytes;
#endif
}

}  // namespace tpcomm::kernels::cpu
