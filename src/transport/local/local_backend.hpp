// The local backend: a group of one rank, where every collective is a copy.
#pragma once

#include <memory>

#include "transport/common/backend.hpp"

namespace tpcomm::transport {

std::unique_ptr<CollectiveBackend> make_local_backend();

}  // namespace tpcomm::transport
