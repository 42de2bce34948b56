// tpcomm._tpcomm.Comm's hold on its C++ Communicator, shared by the calls (which run with the
// GIL released, so from several Python threads at once) and close() (which may come from yet
// another thread while they run). Each call holds a Use for its whole length; close() refuses
// new Uses, aborts the communicator if a Use is in flight so that its call ends promptly with
// an error, waits for the last Use to end, and only then destroys the communicator: no call
// ever runs on a destroyed one (issue 32, defect 3).
#pragma once

#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>

#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::python {

class Comm {
  struct Shared {
    std::mutex mutex;
    std::condition_variable idle;  // notified when `uses` drops to 0, and once destroyed
    std::unique_ptr<Communicator> comm;
    bool closed = false;
    bool destroyed = false;
    pid_t creator = ::getpid();  // a forked child's copy counts its parent's calls, not its own
    int uses = 0;
  };

 public:
  explicit Comm(std::unique_ptr<Communicator> c) : s_(std::make_shared<Shared>()) {
    s_->comm = std::move(c);
  }

  // The communicator for one call; "this communicator was closed" once close() began.
  class Use {
   public:
    explicit Use(const Comm& owner) : s_(owner.s_.get()) {
      std::lock_guard<std::mutex> lock(s_->mutex);
      if (s_->closed) throw invalid_input("this communicator was closed");
      ++s_->uses;
    }
    ~Use() {
      std::lock_guard<std::mutex> lock(s_->mutex);
      if (--s_->uses == 0) s_->idle.notify_all();
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    Communicator* operator->() const { return s_->comm.get(); }
    Communicator& operator*() const { return *s_->comm; }

   private:
    Shared* s_;
  };

  // Call with the GIL released: it waits for the calls in flight, which may need the GIL (a
  // Python log sink) to end. A second close() returns at once (or waits for the first one).
  void close() {
    std::unique_lock<std::mutex> lock(s_->mutex);
    if (s_->closed) {
      s_->idle.wait(lock, [&] { return s_->destroyed; });
      return;
    }
    s_->closed = true;
    // In a forked child the calls counted are the parent's, whose threads do not exist here:
    // nothing to wait for, and an abort would reach the parent's group through the store.
    if (s_->uses > 0 && ::getpid() == s_->creator) {
      // Not under the mutex: abort() talks to the store, and the calls take the mutex to end.
      lock.unlock();
      try {
        s_->comm->abort("close() was called while a call was in flight (from another thread)");
      } catch (const Error&) {  // the calls end at their deadline instead
      }
      lock.lock();
      s_->idle.wait(lock, [&] { return s_->uses == 0; });
    }
    std::unique_ptr<Communicator> last = std::move(s_->comm);
    lock.unlock();
    last.reset();  // its shared memory, sockets and threads, now
    lock.lock();
    s_->destroyed = true;
    s_->idle.notify_all();  // a second close() waiting for the first
  }

  bool closed() const {
    std::lock_guard<std::mutex> lock(s_->mutex);
    return s_->closed;
  }

 private:
  std::shared_ptr<Shared> s_;  // shared: pybind11 moves Comm values around
};

}  // namespace tpcomm::python
