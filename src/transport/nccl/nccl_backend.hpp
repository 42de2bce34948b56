// The nccl backend: the fallback engine of CUDA groups. Its communicator is created with our
// bootstrap carrying the unique id, non-blocking, so that creation honours our deadline and a
// missing rank is a timeout rather than a hang inside NCCL.
#pragma once

#include <chrono>
#include <memory>

#include "tpcomm/bootstrap.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::transport {

struct NcclConfig {
  int rank = 0;
  int size = 1;
  int device = 0;  // CUDA device ordinal of this rank
  std::shared_ptr<Bootstrap> bootstrap;
  std::chrono::milliseconds timeout{60000};
};

std::unique_ptr<CollectiveBackend> make_nccl_backend(const NcclConfig& config);

}  // namespace tpcomm::transport
