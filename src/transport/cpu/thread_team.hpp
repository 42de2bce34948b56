// A rank's team of threads for one large call: the caller and `size() - 1` workers split the
// call's copies and reductions (team_ops.hpp), as the CPU all-reduces of vLLM and SGLang split
// theirs over OpenMP threads. Between calls the workers sleep on a futex: a team must never spin
// on cores an engine's compute threads need. They run on the CPUs the creating thread may use
// (the rank's binding), so ranks bound to disjoint shares of a host never meet on a core.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace tpcomm::transport::cpu {

// The most threads a team may have (TPCOMM_THREADS, CommunicatorOptions::threads).
constexpr int kMaxTeamThreads = 256;

class ThreadTeam {
 public:
  // `threads` counts the caller: a team of 1 has no workers and runs everything on the caller.
  explicit ThreadTeam(int threads);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs work(part) for every part in [0, parts) (at most size()), part 0 on the caller, and
  // returns once all have finished. An exception thrown by a part is rethrown here (the first
  // part's in part order) after every part has finished, so nothing outlives the call.
  template <typename Work>
  void run(int parts, Work&& work) {
    run_parts(parts, &work, [](void* w, int part) { (*static_cast<Work*>(w))(part); });
  }

 private:
  using Trampoline = void (*)(void*, int);
  void run_parts(int parts, void* work, Trampoline call);
  void worker_loop(int part);
  void run_part(int part);

  // What the current call runs; written before `generation_` is bumped, read after.
  void* work_ = nullptr;
  Trampoline call_ = nullptr;
  int parts_ = 0;
  std::vector<std::exception_ptr> failures_;  // one per part
  // Futex words: bumped once per call (workers wait on it), and the workers done with this call
  // (the caller waits on it).
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  alignas(64) std::atomic<std::uint32_t> done_{0};
  std::atomic<std::uint32_t> caller_sleeping_{0};
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// The CPUs the calling thread may run on, and how many.
cpu_set_t current_cpus();
int cpu_count(const cpu_set_t& cpus);

}  // namespace tpcomm::transport::cpu
