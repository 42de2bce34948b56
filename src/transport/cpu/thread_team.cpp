// The team's two futex words: workers sleep on `generation_` between calls, the caller on `done_`
// once it has spun a while for workers still at their share.
#include "thread_team.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>

namespace tpcomm::transport::cpu {
namespace {

// The caller spins this long for the workers before it sleeps: the shares are equal, so the
// workers usually finish within their wake-up time of the caller, and a sleeping caller would
// add its own wake-up to the call.
constexpr std::chrono::microseconds kCallerSpin{200};
constexpr int kClockEvery = 64;

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t seen) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, seen, nullptr,
          nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>& word, int how_many) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, how_many, nullptr,
          nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadTeam::ThreadTeam(int threads)
    // NOLINTNEXTLINE(bugprone-throw-keyword-missing): a vector of exception slots, not an exception
    : failures_(static_cast<std::size_t>(threads > 1 ? threads : 1)) {
  // A thread starts on the CPUs its creator may use: the rank's.
  for (int part = 1; part < threads; ++part) {
    workers_.emplace_back([this, part] { worker_loop(part); });
  }
}

ThreadTeam::~ThreadTeam() {
  stopping_ = true;
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(generation_, INT_MAX);
  for (auto& t : workers_) t.join();
}

void ThreadTeam::run_part(int part) {
  try {
    call_(work_, part);
  } catch (...) {
    failures_[static_cast<std::size_t>(part)] = std::current_exception();
  }
}

void ThreadTeam::worker_loop(int part) {
  std::uint32_t seen = 0;
  for (;;) {
    std::uint32_t now = generation_.load(std::memory_order_acquire);
    while (now == seen) {
      futex_wait(generation_, seen);
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stopping_) return;
    if (part < parts_) run_part(part);
    // Sequentially consistent with the caller's `caller_sleeping_` store and `done_` load: either
    // this worker sees the caller asleep, or the caller sees this increment before it sleeps.
    const std::uint32_t done = done_.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (done == workers_.size() && caller_sleeping_.load(std::memory_order_seq_cst) != 0) {
      futex_wake(done_, 1);
    }
  }
}

void ThreadTeam::run_parts(int parts, void* work, Trampoline call) {
  if (parts <= 1 || workers_.empty()) {
    for (int part = 0; part < parts; ++part) call(work, part);
    return;
  }
  work_ = work;
  call_ = call;
  parts_ = parts < size() ? parts : size();
  for (auto& f : failures_) f = nullptr;
  done_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(generation_, INT_MAX);
  run_part(0);
  const auto all = static_cast<std::uint32_t>(workers_.size());
  std::chrono::steady_clock::time_point since{};
  for (long spin = 0; done_.load(std::memory_order_acquire) != all; ++spin) {
    if (spin % kClockEvery == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (spin == 0) since = now;
      if (now - since > kCallerSpin) break;
    }
    cpu_relax();
  }
  caller_sleeping_.store(1, std::memory_order_seq_cst);
  for (std::uint32_t d = done_.load(std::memory_order_seq_cst); d != all;
       d = done_.load(std::memory_order_seq_cst)) {
    futex_wait(done_, d);
  }
  caller_sleeping_.store(0, std::memory_order_relaxed);
  for (auto& f : failures_) {
    if (f) std::rethrow_exception(f);
  }
}

cpu_set_t current_cpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) CPU_SET(sched_getcpu(), &cpus);
  return cpus;
}

int cpu_count(const cpu_set_t& cpus) {
  return CPU_COUNT(&cpus);
}

}  // namespace tpcomm::transport::cpu
