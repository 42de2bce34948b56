// Spin, yield, then futex sleep, with deadline, abort and liveness checks.
#include "shm_wait.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/rank_list.hpp"
#include "common/thread_state.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::shm {
namespace {

// Spinning pays while every rank has a core of its own, for as long as the caller allows
// (TPCOMM_SHM_SPIN_US): a peer that is still copying or reading is usually done within tens of
// microseconds, and a rank that went to sleep wakes tens of microseconds late on a VM, which
// the next call's arrival then waits for too. When ranks outnumber cores the peer we wait for
// may need this core, so the caller passes no spin and the wait yields almost at once.
constexpr int kMinSpins = 8;     // before yielding, in any case
constexpr int kClockEvery = 64;  // spins between reads of the clock while spinning
constexpr int kYields = 64;
constexpr int kAbortCheckEvery = 64;  // spins between reads of the shared abort word
constexpr int kFlushWakeAfter = 16;   // spins before a pending wake is flushed

constexpr long kSleepSliceNs = 2'000'000;  // 2 ms between checks while asleep

// A peer that is late because an outside process holds its core is back within a scheduler
// slice or two (a few ms), and then waits for this rank; had this rank gone to sleep, it would
// wake that much late again under the same load (rounds of 0.25-1 ms per call were measured).
// So when the spin runs out and every late peer is runnable on another CPU, the wait keeps
// spinning, looking again every kRecheckEvery, up to kRunnablePeerSpin from its start. A peer
// asleep in its own code, or queued on this rank's CPU, gets the core at once instead.
constexpr std::chrono::milliseconds kRunnablePeerSpin{20};
constexpr std::chrono::milliseconds kRecheckEvery{1};
// A spin that lasts yields the core every so often: a no-op while nothing else wants it, and
// under load it hands this rank's share of the core to the outside process while the peer is
// off its own, so that the share is there when the peer is back. W = 2 beside one busy process
// per core, 7 alternating runs, median batch of 5000 calls (us, 4 KiB / 16 / 64 / 256 KiB):
// spinning on without yields 3.1 / 8.3 / 27.6 / 100, yielding every 100 us 2.8 / 5.7 / 15.6 /
// 57, every 300 us 2.2 / 5.5 / 15.0 / 57.6 (Intel MPI, which spins: 1.9 / 6.4 / 37 / 88).
constexpr std::chrono::microseconds kYieldEvery{300};

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t seen) {
  timespec slice{0, kSleepSliceNs};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, seen, &slice, nullptr, 0);
}

// Names the calling thread as the one that waits in this rank's calls (set-up named the thread
// that created the communicator; a caller may call from another).
void note_waiting_thread(RankControl& mine) {
  const int tid = common::this_thread_id();
  if (mine.tid.load(std::memory_order_relaxed) != tid) {
    mine.tid.store(tid, std::memory_order_relaxed);
  }
}

// Whether every peer that has not raised its flag is runnable on a CPU other than this one.
template <typename Ready>
bool late_peers_run_elsewhere(const RankControl* control, int world, int self, Ready ready) {
  const int here = sched_getcpu();
  for (int p = 0; p < world; ++p) {
    if (p == self || ready(p)) continue;
    const auto state = common::read_thread_state(control[p].tid.load(std::memory_order_relaxed));
    if (!state || !state->runnable || state->cpu == here) return false;
  }
  return true;
}

// The spinning part of a wait, checked every kClockEvery rounds from the first: whether it goes
// on, yielding the core every kYieldEvery. `late_elsewhere` says whether every late peer is
// runnable on another CPU.
class SpinClock {
 public:
  explicit SpinClock(std::chrono::microseconds spin) : spin_(spin) {}

  template <typename LateElsewhere>
  bool spinning(LateElsewhere late_elsewhere) {
    const auto now = std::chrono::steady_clock::now();
    if (!started_) {
      started_ = true;
      since_ = yielded_ = now;
      until_ = now + spin_;
    }
    if (now >= until_ && now - since_ < kRunnablePeerSpin && late_elsewhere()) {
      until_ = now + kRecheckEvery;
    }
    if (now >= until_) return false;
    if (now - yielded_ >= kYieldEvery) {
      sched_yield();
      yielded_ = now;
    }
    return true;
  }

 private:
  const std::chrono::microseconds spin_;
  bool started_ = false;
  std::chrono::steady_clock::time_point since_{};  // the first check
  std::chrono::steady_clock::time_point until_{};
  std::chrono::steady_clock::time_point yielded_{};
};

}  // namespace

bool ranks_have_own_cores(int ranks) {
  static const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return ranks <= cores;
}

// The fence pairs with the sleeper's increment of `sleepers` (both sequentially consistent): either
// this rank sees the sleeper, or the sleeper's last readiness check sees the publish. While nobody
// sleeps the shared line is only read, so spinning peers never fight over it.
std::string stopped_by_text(std::int32_t aborted_by) {
  return aborted_by > 0 ? fmt::format("rank {} aborted the group", aborted_by - 1)
                        : fmt::format("rank {} closed the communicator", -aborted_by - 1);
}

void wake_sleepers(SegmentHeader& header) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header.sleepers.load(std::memory_order_relaxed) > 0) {
    header.wake.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&header.wake), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

namespace {

void throw_if_a_laggard_died(const RankControl* control, const std::vector<int>& laggards,
                             const std::function<std::string()>& what) {
  for (int p : laggards) {
    const int pid = control[p].pid.load(std::memory_order_acquire);
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("rank {} (pid {}) died; {} cannot complete", p, pid, what()));
    }
  }
}

}  // namespace

void wait_for_peers(SegmentHeader& header, RankControl* control, int world, int self, Flag which,
                    std::uint64_t seq, std::chrono::milliseconds timeout,
                    std::chrono::microseconds spin, const std::function<std::string()>& what,
                    bool& wake_pending) {
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

  const bool spin_long = spin.count() > 0;
  SpinClock clock(spin);
  long yields_from = -1;  // the round spinning ended; -1 while spinning
  std::optional<Deadline> deadline;
  for (long round = 0;; ++round) {
    if (all_ready()) return;
    if (round % kAbortCheckEvery == 0) {
      if (std::int32_t by = header.aborted_by.load(std::memory_order_acquire); by != 0) {
        // A peer that arrived and then closed (or aborted) published its arrival first: seen
        // late, this step still completes (the caller's check after the call decides, by
        // aborted_at_call). Throwing here failed a barrier whose peer had passed it and closed.
        if (all_ready()) return;
        throw Error(ErrorCode::kAborted, fmt::format("{} ({})", stopped_by_text(by), what()));
      }
    }
    if (round >= kFlushWakeAfter) flush_wake(header, wake_pending);
    if (yields_from < 0) {
      bool spinning = round < kMinSpins;
      if (!spinning && spin_long) {
        spinning = true;
        if (round % kClockEvery == 0) {  // the clock is not read by a wait shorter than this
          // Peers look this thread up once their own spin runs out; a short wait need not say.
          if (round == kClockEvery) note_waiting_thread(control[self]);
          spinning =
              clock.spinning([&] { return late_peers_run_elsewhere(control, world, self, ready); });
        }
      }
      if (spinning) {
        cpu_relax();
        continue;
      }
      flush_wake(header, wake_pending);
      yields_from = round;
      deadline = Deadline::after(timeout);
    }
    if (round < yields_from + kYields) {
      sched_yield();
      continue;
    }
    // Asleep: check the peers' processes and the deadline every slice.
    throw_if_a_laggard_died(control, laggards(), what);
    if (deadline->expired()) {
      throw Error(ErrorCode::kTimeout,
                  fmt::format("{} did not arrive within {} ms ({})",
                              common::rank_set_text(laggards()), timeout.count(), what()));
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
