// Cross-memory attach for shm (single_copy.hpp).
#include "single_copy.hpp"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "common/bytes_text.hpp"
#include "common/log_format.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::cpu {

using common::to_bytes;

int peer_process(int pid) {
  return pid == getpid() ? 0 : pid;
}

void read_peer_memory(int peer, int pid, std::uint64_t address, void* to, std::size_t bytes) {
  if (pid == 0) {  // ranks as threads of one process
    std::memcpy(to, reinterpret_cast<const void*>(address), bytes);
    return;
  }
  auto* dst = static_cast<std::uint8_t*>(to);
  while (bytes > 0) {  // the kernel may copy less than asked (large reads)
    iovec local{dst, bytes};
    iovec remote{reinterpret_cast<void*>(address), bytes};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("reading rank {}'s input (pid {}, process_vm_readv): {}", peer, pid,
                              got == 0 ? "nothing read" : std::strerror(errno)));
    }
    dst += got;
    address += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
}

bool agree_on_single_copy(Bootstrap& bootstrap, bool enabled, const Deadline& deadline) {
  // Under Yama's ptrace_scope 1 only a process's ancestors may read it; ranks are siblings. (As
  // Open MPI's vader does; with TPCOMM_SHM_SINGLE_COPY=0 the process's setting is left alone.)
  if (enabled) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  const std::uint64_t word = 0x7c0ffee000000000ULL + static_cast<std::uint64_t>(bootstrap.rank());
  const auto posts = bootstrap.all_gather(
      to_bytes(fmt::format("{} {}", getpid(), reinterpret_cast<std::uintptr_t>(&word))),
      "shm single-copy probe", deadline);
  std::string why = enabled ? "" : "TPCOMM_SHM_SINGLE_COPY=0";
  for (int r = 0; r < bootstrap.size() && why.empty(); ++r) {
    if (r == bootstrap.rank()) continue;
    std::istringstream in(common::to_text(posts[static_cast<std::size_t>(r)]));
    int pid = 0;
    std::uint64_t address = 0;
    in >> pid >> address;
    std::uint64_t got = 0;
    try {
      read_peer_memory(r, peer_process(pid), address, &got, sizeof(got));
      if (got != 0x7c0ffee000000000ULL + static_cast<std::uint64_t>(r)) {
        why = fmt::format("rank {}'s probe word read back wrong", r);
      }
    } catch (const Error& e) {
      why = e.what();
    }
  }
  // Also the barrier that keeps `word` alive until every peer has read it.
  const auto votes = bootstrap.all_gather(to_bytes(why), "shm single-copy vote", deadline);
  for (std::size_t r = 0; r < votes.size(); ++r) {
    if (votes[r].empty()) continue;
    TPCOMM_LOG(kInfo, "shm",
               "rank {}: single-copy reads off (rank {}: {}); calls planned as "
               "shm/single_copy go through the lanes",
               bootstrap.rank(), r, common::to_text(votes[r]));
    return false;
  }
  TPCOMM_LOG(kDebug, "shm",
             "rank {}: single-copy reads on: calls the plan routes to shm/single_copy read "
             "each peer's input where it lies",
             bootstrap.rank());
  return true;
}

}  // namespace tpcomm::transport::cpu
