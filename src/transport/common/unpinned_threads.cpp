// UnpinnedThreadScope (unpinned_threads.hpp).
#include "unpinned_threads.hpp"

#include <pthread.h>
#include <sys/sysinfo.h>

namespace tpcomm::transport {

UnpinnedThreadScope::UnpinnedThreadScope() {
  if (pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_) != 0) return;
  cpu_set_t all;
  CPU_ZERO(&all);
  const int cpus = get_nprocs_conf();
  for (int c = 0; c < cpus && c < CPU_SETSIZE; ++c) CPU_SET(c, &all);
  // The kernel keeps the mask inside the process's cpuset (a container's CPUs stay its own).
  if (CPU_EQUAL(&all, &saved_)) return;
  widened_ = pthread_setaffinity_np(pthread_self(), sizeof(all), &all) == 0;
}

UnpinnedThreadScope::~UnpinnedThreadScope() {
  if (widened_) pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_);
}

}  // namespace tpcomm::transport
