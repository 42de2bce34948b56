#include "common/fair_timed_mutex.hpp"

#include <algorithm>

namespace tpcomm {

// Takes a ticket, waits until it is first in line and the mutex is free, or gives up at `until`
// (never, when null) and leaves the line.
bool FairTimedMutex::acquire(std::unique_lock<std::mutex>& guard,
                             const std::chrono::steady_clock::time_point* until) {
  const std::uint64_t ticket = next_ticket_++;
  line_.push_back(ticket);
  auto my_turn = [&] { return !held_ && line_.front() == ticket; };
  const bool got = until == nullptr ? (turn_.wait(guard, my_turn), true)
                                    : turn_.wait_until(guard, *until, my_turn);
  if (!got) {
    line_.erase(std::find(line_.begin(), line_.end(), ticket));
    turn_.notify_all();  // the one behind may be first in line now
    return false;
  }
  line_.pop_front();
  held_ = true;
  return true;
}

void FairTimedMutex::lock() {
  std::unique_lock<std::mutex> guard(mutex_);
  acquire(guard, nullptr);
}

bool FairTimedMutex::try_lock() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (held_ || !line_.empty()) return false;
  held_ = true;
  return true;
}

bool FairTimedMutex::try_lock_until(std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> guard(mutex_);
  return acquire(guard, &until);
}

void FairTimedMutex::unlock() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    held_ = false;
  }
  turn_.notify_all();
}

int FairTimedMutex::waiting() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return static_cast<int>(line_.size());
}

}  // namespace tpcomm
