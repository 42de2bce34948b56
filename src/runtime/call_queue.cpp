#include "call_queue.hpp"

namespace tpcomm::runtime {

CallQueue::Turn::Turn(CallQueue& queue) : queue_(queue) {
  std::unique_lock<std::mutex> lock(queue_.mutex_);
  const auto me = std::this_thread::get_id();
  if (queue_.depth_ > 0 && queue_.owner_ == me) {
    ++queue_.depth_;
    return;
  }
  const std::uint64_t ticket = queue_.next_ticket_++;
  ++queue_.waiting_;
  // No deadline here: the call being served has its own, and ends (returns or throws) by it.
  queue_.served_.wait(lock, [&] { return queue_.serving_ == ticket; });
  --queue_.waiting_;
  queue_.owner_ = me;
  queue_.depth_ = 1;
}

CallQueue::Turn::~Turn() {
  std::lock_guard<std::mutex> lock(queue_.mutex_);
  if (--queue_.depth_ > 0) return;
  queue_.owner_ = std::thread::id();
  ++queue_.serving_;
  queue_.served_.notify_all();
}

int CallQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_;
}

}  // namespace tpcomm::runtime
