#include "fork_generation.hpp"

#include <pthread.h>

#include <atomic>

namespace tpcomm::common {
namespace {

std::atomic<std::uint64_t> generation{0};

void count_fork_in_child() {
  generation.fetch_add(1, std::memory_order_relaxed);
}

// Registered once, before the first communicator can exist (static initialisation of the
// library), so no fork() after that goes uncounted.
const bool registered = [] {
  pthread_atfork(nullptr, nullptr, count_fork_in_child);
  return true;
}();

}  // namespace

std::uint64_t process_fork_generation() {
  (void)registered;
  return generation.load(std::memory_order_relaxed);
}

}  // namespace tpcomm::common
