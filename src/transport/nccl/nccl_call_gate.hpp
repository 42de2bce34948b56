// NCCL lets one thread at a time operate a communicator, and ncclCommAbort frees it: an abort
// from the watchdog thread or from Communicator::abort() (any thread) while the user's thread is
// inside an NCCL call on the same communicator (enqueueing, or polling ncclInProgress) breaks
// that rule and can leave the call using a freed communicator (docs/gpu.md, "One thread in the
// communicator at a time"). Every NCCL call enters this gate and leaves it; an abort is requested
// through it:
//  - with no call inside, the abort runs at once, under the gate's lock, so none enters meanwhile;
//  - with a call inside, it is recorded, the call's wait loops see abort_requested() and stop
//    waiting, and the last call to leave performs it;
//  - from the request on, every enter is refused; the abort runs exactly once.
// No CUDA or NCCL here: the abort is an action, so that the rule is tested on any host.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

namespace tpcomm::transport {

class NcclCallGate {
 public:
  using Action = std::function<void()>;

  // `abort_action` ends the communicator (ncclCommAbort); it must not throw.
  explicit NcclCallGate(Action abort_action);
  NcclCallGate(const NcclCallGate&) = delete;
  NcclCallGate& operator=(const NcclCallGate&) = delete;

  // A call on the communicator begins. Throws Error(kAborted), naming `what` and the abort's
  // reason, once an abort was requested or the communicator closed.
  void enter(const char* what);
  // The same without throwing (the watchdog's polls): false when refused.
  bool try_enter();
  // The call ended: performs a requested abort when it was the last call inside.
  void leave();

  // From any thread, any number of times: the communicator is aborted now, or at the leave of
  // the call(s) inside. The first reason is kept. Nothing happens after close().
  void request_abort(const std::string& why);
  // For a call's wait loops: stop waiting, the abort waits for this call to leave.
  bool abort_requested() const { return requested_.load(std::memory_order_acquire); }
  std::string abort_reason() const;
  // Whether the abort action ran.
  bool aborted() const;

  // The communicator's end, with no call inside (its owner is being destroyed): runs `destroy`
  // unless the abort ran; afterwards requests do nothing and every enter is refused.
  void close(const Action& destroy);

  // enter() ... leave() for one scope.
  class Call {
   public:
    Call(NcclCallGate& gate, const char* what) : gate_(gate) { gate_.enter(what); }
    ~Call() { gate_.leave(); }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    NcclCallGate& gate_;
  };

 private:
  void perform_locked();

  Action abort_action_;
  mutable std::mutex mutex_;
  int inside_ = 0;
  std::string why_;
  std::atomic<bool> requested_{false};
  bool performed_ = false;  // the abort action ran
  bool closed_ = false;     // close() ran (destroyed, or already aborted)
};

}  // namespace tpcomm::transport
