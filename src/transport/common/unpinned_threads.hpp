// Helper threads that must not share the rank's core. A rank bound to one CPU (tpcomm run
// --bind-to core, mpirun's default binding for small jobs) passes its binding to every thread it
// starts; Gloo's event loop and tpcomm's Gloo worker then take turns with the rank's own thread on
// that one core, and a 4 KiB Gloo all-reduce took 6.8 ms instead of 0.4 ms unbound. While a scope
// lives, this thread may run on every CPU the process's cpuset allows, so the threads it starts
// inherit that; its own binding is restored when the scope ends.
#pragma once

#include <sched.h>

namespace tpcomm::transport {

class UnpinnedThreadScope {
 public:
  UnpinnedThreadScope();
  ~UnpinnedThreadScope();
  UnpinnedThreadScope(const UnpinnedThreadScope&) = delete;
  UnpinnedThreadScope& operator=(const UnpinnedThreadScope&) = delete;

 private:
  cpu_set_t saved_;
  bool widened_ = false;
};

}  // namespace tpcomm::transport
