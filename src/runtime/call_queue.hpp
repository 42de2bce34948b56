// One call of a communicator at a time, in the order the calls arrive (docs/communicator.md,
// "Threads"). Two threads of a rank may call the same communicator: each call waits its turn
// instead of interleaving with the other in the backend, whose lanes, scratch buffers and
// sequence numbers belong to one call at a time. Issuing the same calls in the same order on
// every rank stays the caller's duty, as with PyTorch's process groups.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace tpcomm::runtime {

// A ticket lock: turns are served in arrival order (a plain mutex may let one thread in again
// and again). A thread that holds the turn may enter again (broadcast runs all_gather calls,
// split runs bootstrap calls): only its outermost entry takes a ticket.
class CallQueue {
 public:
  // Holds the turn from construction (which waits for it) to destruction.
  class Turn {
   public:
    explicit Turn(CallQueue& queue);
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    CallQueue& queue_;
  };

  // How many threads wait for a turn now (for tests and the log).
  int waiting() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable served_;
  std::uint64_t next_ticket_ = 0;
  std::uint64_t serving_ = 0;
  std::thread::id owner_;
  int depth_ = 0;  // entries of the owner still open
  int waiting_ = 0;
};

}  // namespace tpcomm::runtime
