// What every call of the public Communicator API goes through (docs/communicator.md, "Threads",
// "fork()" and "Closing"): refused once the communicator is closed and in a fork() child; run one
// at a time in arrival order (call_queue.hpp); no exception but tpcomm::Error leaves it. And
// close(), the one way a communicator ends: refuse new calls, abort a call in flight (from
// another thread) so that it ends promptly, wait for the calls in flight, tear down. A C++ user
// and the Python binding get the same contract.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>

#include "call_queue.hpp"
#include "group_abort.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::runtime {

class CallGate {
 public:
  CallGate(GroupAbort& group_abort, int rank);
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  // Runs `body` as one call named `what`. A thread inside a call may enter again (broadcast runs
  // all_gather calls): only its outermost entry waits for a turn.
  template <typename Body>
  auto run(std::string_view what, Body&& body) -> decltype(body()) {
    const InFlight counted(*this, what);
    const CallQueue::Turn turn(queue_);
    try {
      return body();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw foreign_failure(what, e);
    }
  }

  // Closes the gate: later calls throw kInvalidInput ("this communicator was closed"); calls in
  // flight are ended by an abort and waited for; then `tear_down` runs (once). Idempotent: a
  // second close() waits for the first. In a fork() child it only closes the gate: the group is
  // the parent's, and nothing of it may be torn down here.
  void close(const std::function<void()>& tear_down);
  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // Whether this process is a fork() child of the one that created the communicator.
  bool in_forked_child() const;
  // Throws kInvalidInput naming fork() when in_forked_child(): `what` is the refused call.
  void refuse_in_forked_child(std::string_view what) const;
  // Throws kInvalidInput once closed.
  void refuse_if_closed(std::string_view what) const;

 private:
  // Counts one call from its entry (refused when closed) to its end.
  class InFlight {
   public:
    InFlight(CallGate& gate, std::string_view what);
    ~InFlight();
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    CallGate& gate_;
  };

  // A failure that is not a tpcomm::Error (std::bad_alloc, std::system_error, ...) as one:
  // logged, and the communicator aborted so that the peers are told.
  Error foreign_failure(std::string_view what, const std::exception& e);

  GroupAbort& group_abort_;
  const int rank_;
  // The process that created it: a fork() child inherits the object but not the group (its
  // sockets, threads and segments are the parent's), so it may neither call nor tear it down.
  const std::uint64_t fork_generation_;
  CallQueue queue_;
  mutable std::mutex mutex_;  // never taken in a fork() child: a parent's thread may have held it
  std::condition_variable idle_;
  std::atomic<bool> closed_{false};
  bool torn_down_ = false;
  int in_flight_ = 0;
};

}  // namespace tpcomm::runtime
