// The shm backend: collectives among the ranks of one node through one POSIX shared-memory
// segment per communicator (DESIGN §3). See shm_layout.hpp for the synchronisation protocol.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "tpcomm/bootstrap.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::transport {

struct ShmConfig {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Bootstrap> bootstrap;  // to share the segment's name
  std::uint64_t comm_id = 0;
  std::chrono::milliseconds timeout{60000};
  std::size_t slot_bytes = 512u << 10;  // workspace per rank (TPCOMM_SHM_WORKSPACE)
};

std::unique_ptr<CollectiveBackend> make_shm_backend(const ShmConfig& config);

}  // namespace tpcomm::transport
