// The names of tpcomm's /dev/shm segments and the sweep of those whose creator died before it
// could unlink them (killed in the set-up window, or with a launcher killed by SIGKILL). A name
// carries its creator's pid and pid namespace — /tpcomm-<kind>-<pid>-n<pid namespace>-<unique> —
// so a segment of a dead process of our own namespace is removed at once, while one from another
// namespace (whose pids mean nothing here) only once it is old.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tpcomm::common {

// "/tpcomm-<kind>-<pid>-n<namespace>-<unique>" for this process.
std::string segment_name(std::string_view kind, std::string_view unique);

struct SegmentOwner {
  std::string kind;
  int pid = 0;
  std::optional<unsigned long> pid_namespace;  // absent in names of older versions
};
// The owner a segment's file name (without the leading '/') names; nullopt: not ours.
std::optional<SegmentOwner> segment_owner(std::string_view file_name);

// This process's pid namespace (the inode of /proc/self/ns/pid), or nullopt.
std::optional<unsigned long> own_pid_namespace();

// Removes /dev/shm segments whose creator is gone (see above); returns how many.
int remove_stale_segments();

}  // namespace tpcomm::common
