// Spin, yield, then futex sleep, with deadline, abort and liveness checks.
#include "shm_wait.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/rank_list.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::shm {
namespace {

// Spinning pays while every rank has a core; when ranks outnumber cores the peer we wait for
// may need this core, so yield almost at once.
constexpr int kSpinsWithOwnCore = 1 << 11;
constexpr int kSpinsOversubscribed = 8;
constexpr int kYields = 64;
constexpr int kAbortCheckEvery = 64;  // spins between reads of the shared abort word
constexpr int kFlushWakeAfter = 16;   // spins before a pending wake is flushed

int spin_budget(int world) {
  static const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return world <= cores ? kSpinsWithOwnCore : kSpinsOversubscribed;
}
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

// The fence pairs with the sleeper's increment of `sleepers` (both sequentially consistent): either
// this rank sees the sleeper, or the sleeper's last readiness check sees the publish. While nobody
// sleeps the shared line is only read, so spinning peers never fight over it.
void wake_sleepers(SegmentHeader& header) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header.sleepers.load(std::memory_order_relaxed) > 0) {
    header.wake.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&header.wake), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

void wait_for_peers(SegmentHeader& header, RankControl* control, int world, int self, Flag which,
                    std::uint64_t seq, std::chrono::milliseconds timeout,
                    const std::function<std::string()>& what, bool& wake_pending) {
  auto ready = [&](int p) {
    return flag(control[p], which, seq).load(std::memory_order_acquire) >= seq;
  };
  // Checked on every spin: no allocation.
  auto all_ready = [&] {
    for (int p = 0; p < world; ++p) {
      if (p != self && !ready(p)) return false;
    }
    return true;
  };
  auto laggards = [&] {
    std::vector<int> out;
    for (int p = 0; p < world; ++p) {
      if (p != self && !ready(p)) out.push_back(p);
    }
    return out;
  };
  const int spins = spin_budget(world);
  std::optional<Deadline> deadline;
  for (long round = 0;; ++round) {
    if (all_ready()) return;
    if (round % kAbortCheckEvery == 0) {
      if (std::int32_t by = header.aborted_by.load(std::memory_order_acquire); by != 0) {
        throw Error(ErrorCode::kAborted,
                    fmt::format("rank {} aborted the group ({})", by - 1, what()));
      }
    }
    if (round >= std::min(spins, kFlushWakeAfter)) flush_wake(header, wake_pending);
    if (round < spins) {
      cpu_relax();
      continue;
    }
    if (round == spins) deadline = Deadline::after(timeout);
    if (round < spins + kYields) {
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
    if (deadline->expired()) {
      throw Error(ErrorCode::kTimeout,
                  fmt::format("{} did not arrive within {} ms ({})",
                              detail::rank_set_text(laggards()), timeout.count(), what()));
    }
    header.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t seen = header.wake.load(std::memory_order_seq_cst);
    if (!all_ready() && header.aborted_by.load(std::memory_order_acquire) == 0) {
      futex_wait(header.wake, seen);
    }
    header.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace tpcomm::transport::shm
