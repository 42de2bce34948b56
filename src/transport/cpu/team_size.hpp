// How many threads a rank's team gets. The user's number (TPCOMM_THREADS, the communicator's
// option) when given; else the rank's CPUs shared evenly with every rank of its group that may
// run on any of them, so that the ranks of one host together never ask for more threads than it
// has CPUs. A rank bound to one CPU (or sharing one) works alone, as every rank did before teams.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace tpcomm::transport::cpu {

struct TeamSize {
  int threads = 1;
  std::string why;  // "2 threads (TPCOMM_THREADS)", "1 thread (2 CPUs shared by 2 ranks)"
};

// `requested`: the user's number, 0 for the default. `group[r]`: the CPUs rank r may run on
// (this rank's among them, at `self`). A rank whose CPUs are all `online` CPUs of the machine
// (not bound) shares them with all `ranks_on_machine` ranks (ranks outside the group included:
// hier's other simulated nodes).
TeamSize team_size(int requested, const std::vector<cpu_set_t>& group, int self,
                   int ranks_on_machine, int online);

}  // namespace tpcomm::transport::cpu
