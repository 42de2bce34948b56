// A timed mutex that serves waiters in arrival order. A thread that unlocks and locks again at
// once (a store wait going slice after slice) would otherwise keep winning a plain mutex against
// another thread that waits for it: the store client's connection was held by one wait for
// seven slices in a row while a second wait's key had long arrived.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

namespace tpcomm {

// Meets TimedLockable for std::unique_lock with steady_clock time points. A waiter that gives up
// at its time point leaves the line; those behind it move up.
class FairTimedMutex {
 public:
  void lock();
  bool try_lock();
  bool try_lock_until(std::chrono::steady_clock::time_point until);
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_until(std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(d));
  }
  void unlock();

  // How many threads wait in line now (for tests).
  int waiting() const;

 private:
  bool acquire(std::unique_lock<std::mutex>& guard,
               const std::chrono::steady_clock::time_point* until);

  mutable std::mutex mutex_;
  std::condition_variable turn_;
  std::deque<std::uint64_t> line_;  // tickets of the waiting threads, oldest first
  std::uint64_t next_ticket_ = 0;
  bool held_ = false;
};

}  // namespace tpcomm
