// Whether another thread on this machine is running or waiting for a CPU, and which CPU it last
// ran on, from /proc (what `ps -L -o stat,psr` shows). A wait uses it to tell a peer that an
// outside process took off its core, which will be back within a scheduler slice, from a peer
// asleep in its own code.
#pragma once

#include <optional>

namespace tpcomm::common {

struct ThreadState {
  bool runnable = false;  // running or queued for a CPU ('R'), not asleep or stopped
  int cpu = -1;           // the CPU it last ran on
};

// The state of thread `tid` (a thread id as gettid() gives it, in this PID namespace), or nothing
// where /proc does not say (the thread ended, /proc is not mounted). Reads one small file without
// allocating: about 10-20 us.
std::optional<ThreadState> read_thread_state(int tid);

// This thread's id, read once per thread (gettid is a system call).
int this_thread_id();

}  // namespace tpcomm::common
