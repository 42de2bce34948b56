// read_thread_state: what /proc says of a thread running on a known CPU, of one asleep, and of
// one that does not exist.
#include "common/thread_state.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace tpcomm::common {
namespace {

using namespace std::chrono_literals;

// Pins the calling thread to `cpu` (restored by the destructor).
class PinnedTo {
 public:
  explicit PinnedTo(int cpu) {
    sched_getaffinity(0, sizeof(before_), &before_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ok_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinnedTo() { sched_setaffinity(0, sizeof(before_), &before_); }
  bool ok() const { return ok_; }

 private:
  cpu_set_t before_;
  bool ok_ = false;
};

int allowed_cpu(int nth) {
  cpu_set_t set;
  sched_getaffinity(0, sizeof(set), &set);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set) && nth-- == 0) return cpu;
  }
  return -1;
}

TEST(ThreadState, ARunningThreadIsRunnableOnTheCpuItIsPinnedTo) {
  // The second allowed CPU where there are two: a field read wrong is 0 more often than not.
  const int cpu = allowed_cpu(1) >= 0 ? allowed_cpu(1) : allowed_cpu(0);
  ASSERT_GE(cpu, 0);
  const PinnedTo pin(cpu);
  ASSERT_TRUE(pin.ok());
  const auto state = read_thread_state(this_thread_id());
  ASSERT_TRUE(state.has_value());
  EXPECT_TRUE(state->runnable);
  EXPECT_EQ(state->cpu, cpu);
}

TEST(ThreadState, AThreadAsleepIsNotRunnable) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::atomic<int> tid{0};
  std::thread sleeper([&] {
    tid = this_thread_id();
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done; });
  });
  // Until the sleeper is in its wait, /proc may still show it running.
  std::optional<ThreadState> state;
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(5ms);
    state = read_thread_state(tid.load());
    if (state && !state->runnable) break;
  }
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_one();
  sleeper.join();
  ASSERT_TRUE(state.has_value());
  EXPECT_FALSE(state->runnable);
  EXPECT_GE(state->cpu, 0);
}

TEST(ThreadState, AThreadIdOfNoThreadSaysNothing) {
  EXPECT_FALSE(read_thread_state(0).has_value());
  EXPECT_FALSE(read_thread_state(-5).has_value());
  // Above the kernel's largest pid (pid_max is at most 4194304).
  EXPECT_FALSE(read_thread_state(4194305 + 17).has_value());
}

TEST(ThreadState, TheCachedIdIsTheKernelsIdOfEachThread) {
  const int mine = this_thread_id();
  EXPECT_EQ(mine, static_cast<int>(syscall(SYS_gettid)));
  int other = 0;
  std::thread([&] { other = this_thread_id(); }).join();
  EXPECT_NE(other, mine);
  EXPECT_GT(other, 0);
}

}  // namespace
}  // namespace tpcomm::common
