// Gloo writes to its sockets without MSG_NOSIGNAL, so a peer that died makes the write raise
// SIGPIPE, whose default action kills the whole process — a survivor would die instead of
// reporting the dead rank. While a guard lives, SIGPIPE is blocked in this thread (the write then
// fails with EPIPE, which Gloo reports); a SIGPIPE raised meanwhile is consumed before the
// thread's mask is restored, so the program's own SIGPIPE handling is untouched. Threads started
// inside a guard (Gloo's event loop) keep SIGPIPE blocked for good.
#pragma once

#include <signal.h>

namespace tpcomm::transport {

class SigpipeGuard {
 public:
  SigpipeGuard();
  ~SigpipeGuard();
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_mask_;
  bool was_pending_ = false;
};

}  // namespace tpcomm::transport
