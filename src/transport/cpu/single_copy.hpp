// Single-copy reads of a peer process's memory (Linux cross-memory attach, process_vm_readv),
// as Open MPI's vader does: shm's single_copy all-gather copies each peer's input straight into
// the output instead of through the peer's lane, one copy instead of two. Agreed on at set-up by
// a probe (containers, seccomp or Yama can forbid it); off, everything goes through the lanes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tpcomm/bootstrap.hpp"

namespace tpcomm::transport::cpu {

// The pid to pass read_peer_memory for a peer whose process is `pid`: 0 when it is this
// process (ranks as threads of one process). Decided once, at set-up: getpid() is a system
// call, and a read per call and peer paid it (1.4% of a W = 2 all-gather's profile).
int peer_process(int pid);

// Copies `bytes` at `address` in process `pid` (peer_process's answer) to `to`, with memcpy
// when `pid` is 0. Throws kUnavailable naming `peer` when the kernel refuses or the process is
// gone.
void read_peer_memory(int peer, int pid, std::uint64_t address, void* to, std::size_t bytes);

// Set-up, every rank: lets peers read this process (Yama's PR_SET_PTRACER_ANY, unless
// `enabled` is false), then each rank reads a
// word of every peer's; true on every rank when every read worked everywhere and `enabled` on
// every rank (TPCOMM_SHM_SINGLE_COPY). Never throws for a refusal: it is logged, and false.
bool agree_on_single_copy(Bootstrap& bootstrap, bool enabled, const Deadline& deadline);

}  // namespace tpcomm::transport::cpu
