// Spin, yield, then futex sleep, with deadline, abort and liveness checks.
#include "shm_wait.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <vector>

#include <fmt/format.h>

#include "tpcomm/detail/rank_list.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::shm {
namespace {

constexpr int kSpins = 512;
constexpr int kYields = 64;
constexpr long kSleepSliceNs = 2'000'000;  // 2 ms between checks while asleep

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t seen) {
  timespec slice{0, kSleepSliceNs};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, seen, &slice, nullptr, 0);
}

}  // namespace

void wake_all(SegmentHeader& header) {
  header.wake.fetch_add(1, std::memory_order_release);
  if (header.sleepers.load(std::memory_order_acquire) > 0) {
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&header.wake), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

void wait_for_peers(SegmentHeader& header, RankControl* control, int world, int self,
                    const std::function<bool(const RankControl&)>& ready, const Deadline& deadline,
                    const std::function<std::string()>& what) {
  // Checked on every spin: no allocation.
  auto all_ready = [&] {
    for (int p = 0; p < world; ++p) {
      if (p != self && !ready(control[p])) return false;
    }
    return true;
  };
  auto laggards = [&] {
    std::vector<int> out;
    for (int p = 0; p < world; ++p) {
      if (p != self && !ready(control[p])) out.push_back(p);
    }
    return out;
  };
  for (long round = 0;; ++round) {
    const std::uint32_t seen = header.wake.load(std::memory_order_acquire);
    if (all_ready()) return;
    if (std::int32_t by = header.aborted_by.load(std::memory_order_acquire); by != 0) {
      throw Error(ErrorCode::kAborted,
                  fmt::format("rank {} aborted the group ({})", by - 1, what()));
    }
    if (round < kSpins) {
      cpu_relax();
      continue;
    }
    if (round < kSpins + kYields) {
      sched_yield();
      continue;
    }
    // Asleep: check the peers' processes and the deadline every slice.
    for (int p : laggards()) {
      const int pid = control[p].pid.load(std::memory_order_acquire);
      if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
        throw Error(ErrorCode::kUnavailable,
                    fmt::format("rank {} (pid {}) died; {} cannot complete", p, pid, what()));
      }
    }
    if (deadline.expired()) {
      throw Error(ErrorCode::kTimeout, fmt::format("{} did not arrive within {} ms ({})",
                                                   detail::rank_set_text(laggards()),
                                                   deadline.budget().count(), what()));
    }
    header.sleepers.fetch_add(1, std::memory_order_acq_rel);
    if (!all_ready()) futex_wait(header.wake, seen);
    header.sleepers.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace tpcomm::transport::shm
