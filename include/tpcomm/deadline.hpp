// Deadline: every blocking wait in tpcomm takes one, so nothing waits forever. It remembers its
// total budget for error messages ("did not join within 60000 ms").
#pragma once

#include <chrono>

namespace tpcomm {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after(std::chrono::milliseconds budget) {
    return Deadline(Clock::now() + budget, budget);
  }
  // TPCOMM_TIMEOUT_MS from now (default 60000 ms).
  static Deadline from_env();

  bool expired() const { return Clock::now() >= at_; }
  std::chrono::milliseconds remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now());
    return left.count() > 0 ? left : std::chrono::milliseconds(0);
  }
  // For poll(2): the remaining milliseconds, at most `cap_ms`.
  int poll_ms(int cap_ms = 1000) const {
    auto left = remaining().count();
    return static_cast<int>(left < cap_ms ? left : cap_ms);
  }
  std::chrono::milliseconds budget() const { return budget_; }
  Clock::time_point at() const { return at_; }

 private:
  Deadline(Clock::time_point at, std::chrono::milliseconds budget) : at_(at), budget_(budget) {}
  Clock::time_point at_;
  std::chrono::milliseconds budget_;
};

// TPCOMM_TIMEOUT_MS, validated (default 60000 ms).
std::chrono::milliseconds default_timeout();

}  // namespace tpcomm
