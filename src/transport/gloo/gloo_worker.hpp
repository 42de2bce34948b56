// Gloo's calls cannot be interrupted: a rank blocked in one waits for its peers or for Gloo's
// timeout. So the Gloo backend runs each call on this worker thread, on buffers the call's job
// owns, while the caller waits for the job or for abandon() from any thread — what
// Communicator::abort() needs (docs/errors.md). An abandoned job finishes or times out on its
// own, touching only what it owns; the worker then ends without anybody joining it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace tpcomm::transport {

class GlooWorker {
 public:
  GlooWorker();
  ~GlooWorker();
  GlooWorker(const GlooWorker&) = delete;
  GlooWorker& operator=(const GlooWorker&) = delete;

  // Runs `job` on the worker and returns when it has finished, rethrowing what it threw. Throws
  // kAborted when abandon() is called first (the job goes on alone), and kTimeout when it has not
  // finished within `limit` (its own deadlines have then failed).
  void run(std::function<void()> job, std::chrono::milliseconds limit);
  // From any thread: the waiting run() and every later one fail with kAborted naming `why`.
  void abandon(const std::string& why);

  struct Shared;  // what the thread shares with its owner, kept alive by both

 private:
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace tpcomm::transport
