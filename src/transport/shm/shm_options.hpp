// What the shm backend (and hier's shm stage) is built with, beside the group's description
// (BackendContext): its sizes, its waits and its team of threads, each from its environment
// variable or the tuning table.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace tpcomm::transport::shm {

class RegisteredHeap;

struct ShmOptions {
  std::size_t workspace_bytes = 2u << 20;  // per rank (TPCOMM_SHM_WORKSPACE)
  bool single_copy = true;  // may read peers' memory directly (TPCOMM_SHM_SINGLE_COPY)
  // All-reduces this large stream their lane fills; 0: never; -1: never at W = 2, 16 MiB for
  // more ranks (TPCOMM_SHM_STREAMING_FILL; ShmBackend::fill_lane says why).
  std::int64_t streaming_fill_bytes = -1;
  // How long a wait spins before yielding and sleeping, while every rank has a core
  // (TPCOMM_SHM_SPIN_US); longer while the late peers are runnable on other CPUs (shm_wait.cpp).
  std::chrono::microseconds spin{1000};
  // Threads of this rank's team for calls of at least team_min_bytes (TPCOMM_THREADS,
  // CommunicatorOptions::threads); 0: derived from the rank's CPUs (team/team_size.hpp).
  int threads = 0;
  // Clocks each step's fill, wait and consume for stage_times() (TPCOMM_SHM_STAGE_TIMES).
  bool stage_times = false;
  std::size_t team_min_bytes = 256u << 10;  // the tuning table's team_min_bytes
  // The communicator's registered host buffers (Communicator::allocate), read in place.
  std::shared_ptr<RegisteredHeap> registered;
};

}  // namespace tpcomm::transport::shm
