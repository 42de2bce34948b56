// How many fork()s separate this process from the program's first process: 0 there, and one
// more in each child. A communicator remembers the value it was created under, so that a call in
// a fork() child (which inherits the object but not the group) is refused for the cost of one
// relaxed atomic load rather than a getpid() system call on every call.
#pragma once

#include <cstdint>

namespace tpcomm::common {

std::uint64_t process_fork_generation();

}  // namespace tpcomm::common
