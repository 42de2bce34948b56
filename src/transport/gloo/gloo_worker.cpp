// The Gloo backend's worker thread (gloo_worker.hpp).
#include "gloo_worker.hpp"

#include "transport/common/unpinned_threads.hpp"

#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <exception>
#include <mutex>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {

struct GlooWorker::Shared {
  std::mutex mutex;
  std::condition_variable changed;
  std::function<void()> job;  // posted, not yet taken
  std::uint64_t posted = 0;
  std::uint64_t finished = 0;
  std::exception_ptr error;  // of the last finished job
  bool stopping = false;
  std::string abandoned;  // why, once abandoned
};

namespace {

void work(const std::shared_ptr<GlooWorker::Shared>& s) {
  // Gloo writes to sockets without MSG_NOSIGNAL: a dead peer must fail the job, not kill us.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::unique_lock<std::mutex> lock(s->mutex);
  while (true) {
    s->changed.wait(lock, [&] { return s->stopping || s->job; });
    if (!s->job) return;
    auto job = std::move(s->job);
    s->job = nullptr;
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    job = nullptr;  // what it owns goes here, on this thread
    lock.lock();
    s->error = error;
    ++s->finished;
    s->changed.notify_all();
  }
}

}  // namespace

GlooWorker::GlooWorker() : shared_(std::make_shared<Shared>()) {
  UnpinnedThreadScope unpinned;  // not on the bound rank's one core (unpinned_threads.hpp)
  thread_ = std::thread(work, shared_);
}

GlooWorker::~GlooWorker() {
  std::unique_lock<std::mutex> lock(shared_->mutex);
  shared_->stopping = true;
  shared_->changed.notify_all();
  const bool busy = shared_->finished != shared_->posted;
  lock.unlock();
  // A job abandoned in Gloo may block until Gloo's own timeout: it ends alone.
  if (busy) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void GlooWorker::run(std::function<void()> job, std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(shared_->mutex);
  auto fail_if_abandoned = [&] {
    if (!shared_->abandoned.empty()) throw Error(ErrorCode::kAborted, shared_->abandoned);
  };
  fail_if_abandoned();
  if (shared_->finished != shared_->posted) {
    throw Error(ErrorCode::kInternal, "a Gloo call started while the previous one is running");
  }
  shared_->job = std::move(job);
  const std::uint64_t mine = ++shared_->posted;
  shared_->changed.notify_all();
  const bool ended = shared_->changed.wait_for(
      lock, limit, [&] { return shared_->finished == mine || !shared_->abandoned.empty(); });
  if (shared_->finished == mine) {
    if (shared_->error) std::rethrow_exception(shared_->error);
    return;
  }
  fail_if_abandoned();
  if (!ended) {
    throw Error(ErrorCode::kTimeout,
                fmt::format("gloo: the call did not end within {} ms", limit.count()));
  }
}

void GlooWorker::abandon(const std::string& why) {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (shared_->abandoned.empty()) shared_->abandoned = why;
  shared_->changed.notify_all();
}

}  // namespace tpcomm::transport
