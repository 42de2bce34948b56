// The store client's connection lock: waiters are served in arrival order, a waiter that gives
// up leaves the line, and the lock still excludes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "common/fair_timed_mutex.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

void wait_until_waiting(const FairTimedMutex& m, int n) {
  const auto give_up = Clock::now() + 5s;
  while (m.waiting() != n && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(m.waiting(), n);
}

// One thread locks again as soon as it unlocks (a store wait going slice after slice); a thread
// that queued meanwhile gets the lock at the next unlock, not whenever the first one stops.
TEST(FairTimedMutex, AThreadThatLocksAgainAtOnceGoesBehindTheOneWaiting) {
  FairTimedMutex m;
  std::atomic<int> rounds{0};
  std::atomic<bool> stop{false};
  std::thread relocker([&] {
    while (!stop.load()) {
      m.lock();
      rounds.fetch_add(1);
      std::this_thread::sleep_for(2ms);
      m.unlock();
    }
  });
  // Both cores busy (as under ctest -j): a woken waiter is late, and a plain mutex (glibc's, the
  // client's before) went to the relocking thread tens to thousands of times in a row.
  std::vector<std::thread> load;
  for (int i = 0; i < 2; ++i)
    load.emplace_back([&] {
      while (!stop.load()) {
      }
    });
  while (rounds.load() < 3) std::this_thread::sleep_for(1ms);
  const int before = rounds.load();
  const bool got = m.try_lock_until(Clock::now() + 5s);
  const int at_lock = rounds.load();
  if (got) m.unlock();
  stop.store(true);
  relocker.join();
  for (auto& t : load) t.join();
  ASSERT_TRUE(got);
  // The round that held the lock when this thread queued, and at most one that slipped in
  // before it queued.
  EXPECT_LE(at_lock - before, 2) << "the relocking thread took the lock " << at_lock - before
                                 << " times while another thread waited in line";
}

// Three threads wait; the middle one gives up at its time point and leaves the line; the other
// two get the lock in the order they came.
TEST(FairTimedMutex, AWaiterThatGivesUpLeavesTheLineAndTheOthersKeepTheirOrder) {
  FairTimedMutex m;
  m.lock();
  std::atomic<int> served{0};
  auto waiter = [&](std::chrono::milliseconds patience) {
    if (!m.try_lock_until(Clock::now() + patience)) return -1;
    const int order = served.fetch_add(1);
    m.unlock();
    return order;
  };
  auto first = std::async(std::launch::async, waiter, 5000ms);
  wait_until_waiting(m, 1);
  auto impatient = std::async(std::launch::async, waiter, 100ms);
  wait_until_waiting(m, 2);
  auto last = std::async(std::launch::async, waiter, 5000ms);
  wait_until_waiting(m, 3);
  EXPECT_EQ(impatient.get(), -1);
  EXPECT_EQ(m.waiting(), 2);
  EXPECT_FALSE(m.try_lock()) << "try_lock jumped the line";
  m.unlock();
  EXPECT_EQ(first.get(), 0);
  EXPECT_EQ(last.get(), 1);
  EXPECT_EQ(m.waiting(), 0);
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST(FairTimedMutex, ExcludesEveryOtherHolder) {
  FairTimedMutex m;
  long long counter = 0;  // not atomic: only the lock keeps the increments apart
  constexpr int kThreads = 4;
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        if (i % 2 == 0) {
          m.lock();
        } else {
          ASSERT_TRUE(m.try_lock_until(Clock::now() + 10s)) << "thread " << t;
        }
        ++counter;
        m.unlock();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter, static_cast<long long>(kThreads) * kEach);
}

}  // namespace
}  // namespace tpcomm
