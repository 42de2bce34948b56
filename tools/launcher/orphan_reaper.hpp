// What a rank starts outside its process group (setsid, a daemon's double fork) is out of reach
// of the launcher's process-group signals and used to outlive the job. The launcher is the
// subreaper of everything below it, so such a process becomes the launcher's child when its own
// parent ends, and once every rank has ended the launcher stops whatever is left.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tpcomm::cli {

// Makes this process the subreaper of its descendants (PR_SET_CHILD_SUBREAPER): an orphaned
// descendant is re-parented here instead of to init. False where the kernel refuses.
bool become_subreaper();

// This process's children now (from /proc/*/stat), zombies included.
std::vector<pid_t> children_of_this_process();

struct StoppedDescendants {
  std::vector<std::string> stopped;  // "pid (name)" of each process killed
  std::vector<std::string> left;     // those still there when the time ran out
};

// SIGKILLs every child not in `keep`, reaps it, and goes on with the children each leaves
// (re-parented here) until none is left or `limit` has passed.
StoppedDescendants stop_descendants(const std::vector<pid_t>& keep,
                                    std::chrono::milliseconds limit);

// stop_descendants for `tpcomm run` once every rank has ended (2 s at most), saying on stderr
// what it stopped and what it could not.
void stop_what_the_ranks_left(const std::vector<pid_t>& children_before);

}  // namespace tpcomm::cli
