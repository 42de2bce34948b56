// The shm backend: collectives among the ranks of one node through one POSIX shared-memory
// segment per communicator (docs/plan.md). See shm_layout.hpp for the synchronisation protocol.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "tpcomm/bootstrap.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"

namespace tpcomm::transport {

std::unique_ptr<CollectiveBackend> make_shm_backend(const BackendContext& context);

}  // namespace tpcomm::transport
