// The nccl backend: the fallback engine of CUDA groups. Its communicator is created with our
// bootstrap carrying the unique id, non-blocking, so that creation honours our deadline and a
// missing rank is a timeout rather than a hang inside NCCL.
#pragma once

#include <chrono>
#include <memory>

#include "tpcomm/bootstrap.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"

namespace tpcomm::transport {

std::unique_ptr<CollectiveBackend> make_nccl_backend(const BackendContext& context);

}  // namespace tpcomm::transport
