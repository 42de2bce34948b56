// tpcomm._tpcomm.Comm's hold on its C++ Communicator, shared by the calls (which run with the
// GIL released, so from several Python threads at once) and close() (which may come from yet
// another thread while they run). Everything that reads the communicator holds a Use for its
// whole length; close() refuses new Uses, aborts the communicator if a call (one that may wait
// on the peers) is in flight so that it ends promptly with an error, waits for the last Use to
// end, and only then destroys the communicator: nothing ever runs on a destroyed one (issue 32,
// defect 3). The last Comm destroys a communicator nobody closed with the GIL released.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>

#include "common/fork_generation.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "without_gil.hpp"

namespace tpcomm::python {

class Comm {
  // The Uses and the closing of one process. A fork() child takes a fresh Gate on its first
  // touch: the counts it inherits are its parent's (threads that do not exist in the child, so
  // the child must not wait for them), and a mutex or condition variable such a thread held or
  // waited on at the fork would block the child for ever. The child waits for its own Uses.
  struct Gate {
    Gate(std::uint64_t fork_generation, bool inherited_closed)
        : generation(fork_generation), closed(inherited_closed), destroyed(inherited_closed) {}
    const std::uint64_t generation;  // detail::process_fork_generation() of its process
    std::mutex mutex;
    std::condition_variable idle;  // notified when `uses` drops to 0, and once destroyed
    bool closed;
    bool destroyed;  // a parent's close() under way at the fork is finished by nobody here
    int uses = 0;    // every Use
    int calls = 0;   // the Uses of calls that may wait on the peers: close() aborts them
  };

  struct Shared {
    explicit Shared(std::unique_ptr<Communicator> c)
        : gate(new Gate(detail::process_fork_generation(), false)), comm(std::move(c)) {}
    ~Shared() {
      destroy_without_gil(comm);  // dropped unclosed by garbage collection, under the GIL
      Gate* g = gate.load();
      // A parent's Gate in a child is left alone: see Gate.
      if (g->generation == detail::process_fork_generation()) delete g;
    }
    Shared(const Shared&) = delete;
    Shared& operator=(const Shared&) = delete;

    // This process's Gate.
    Gate& current_gate() {
      const std::uint64_t now = detail::process_fork_generation();
      Gate* g = gate.load(std::memory_order_acquire);
      while (g->generation != now) {
        // Nobody in this process writes the parent's Gate: its `closed` reads safely.
        auto fresh = std::make_unique<Gate>(now, g->closed);
        if (gate.compare_exchange_strong(g, fresh.get(), std::memory_order_acq_rel)) {
          return *fresh.release();  // the parent's Gate stays, unused
        }
      }
      return *g;
    }

    std::atomic<Gate*> gate;
    std::unique_ptr<Communicator> comm;  // moved away only by close(), once no Use is left
  };

 public:
  explicit Comm(std::unique_ptr<Communicator> c) : s_(std::make_shared<Shared>(std::move(c))) {}

  // The communicator for the length of one Python call; "this communicator was closed" once
  // close() began.
  class Use {
   public:
    enum Kind {
      kCall,  // may wait on the peers (a collective, allocate, free, split): close() aborts it
      kQuick  // a property, the plan, abort(): close() waits for it, and never aborts for it
    };
    Use(const Comm& owner, Kind kind)
        : s_(owner.s_.get()), gate_(&s_->current_gate()), call_(kind == kCall) {
      std::lock_guard<std::mutex> lock(gate_->mutex);
      if (gate_->closed) throw invalid_input("this communicator was closed");
      ++gate_->uses;
      if (call_) ++gate_->calls;
    }
    ~Use() {
      // Begun before a fork() that ran inside it (from a log sink): its count is the parent's.
      if (gate_->generation != detail::process_fork_generation()) return;
      std::lock_guard<std::mutex> lock(gate_->mutex);
      if (call_) --gate_->calls;
      if (--gate_->uses == 0) gate_->idle.notify_all();
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    Communicator* operator->() const { return s_->comm.get(); }
    Communicator& operator*() const { return *s_->comm; }

   private:
    Shared* s_;
    Gate* gate_;
    bool call_;
  };

  // Call with the GIL released: it waits for the Uses in flight, which may need the GIL (a
  // Python log sink) to end. A second close() returns at once (or waits for the first one).
  void close() {
    Gate& g = s_->current_gate();
    std::unique_lock<std::mutex> lock(g.mutex);
    if (g.closed) {
      g.idle.wait(lock, [&] { return g.destroyed; });
      return;
    }
    g.closed = true;
    // A property read in flight is no reason to abort: the peers would be told "a call was in
    // flight". In a fork() child the calls counted are the child's own, which the communicator
    // refuses at once; its abort() is refused too, reaching nothing of the parent's group.
    if (g.calls > 0) {
      // Not under the mutex: abort() talks to the store, and the calls take the mutex to end.
      lock.unlock();
      try {
        s_->comm->abort("close() was called while a call was in flight (from another thread)");
      } catch (const std::exception&) {  // the calls end at their deadline instead
      }
      lock.lock();
    }
    g.idle.wait(lock, [&] { return g.uses == 0; });
    std::unique_ptr<Communicator> last = std::move(s_->comm);
    lock.unlock();
    last.reset();  // its shared memory, sockets and threads, now (the GIL is released)
    lock.lock();
    g.destroyed = true;
    g.idle.notify_all();  // a second close() waiting for the first
  }

  bool closed() const {
    Gate& g = s_->current_gate();
    std::lock_guard<std::mutex> lock(g.mutex);
    return g.closed;
  }

 private:
  std::shared_ptr<Shared> s_;  // shared: pybind11 moves and copies Comm values around
};

}  // namespace tpcomm::python
