// SIGPIPE blocked around Gloo's socket writes (sigpipe_guard.hpp).
#include "sigpipe_guard.hpp"

#include <pthread.h>

#include <ctime>

namespace tpcomm::transport {
namespace {

bool sigpipe_pending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

}  // namespace

SigpipeGuard::SigpipeGuard() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old_mask_);
  was_pending_ = sigpipe_pending();
}

SigpipeGuard::~SigpipeGuard() {
  if (!was_pending_ && sigpipe_pending()) {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    const timespec now{0, 0};
    sigtimedwait(&pipe, nullptr, &now);  // ours: raised by a write inside the guard
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace tpcomm::transport
