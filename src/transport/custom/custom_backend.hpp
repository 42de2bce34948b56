// The custom backend: tpcomm's own one-shot / two-shot all-reduce, all-gather and reduce-scatter
// kernels over workspaces that every rank of one node maps (VMM, exported as POSIX fds over Unix
// sockets). Set-up is three voted steps (workspace, handle exchange and mapping, a real
// write/read peer probe); a host watchdog turns a kernel that gave up waiting into the
// communicator's error.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "tpcomm/bootstrap.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"

namespace tpcomm::transport {

std::unique_ptr<CollectiveBackend> make_custom_backend(const BackendContext& context);

// Why this process cannot run GPU backends, or empty (driver_api.hpp).
std::string cuda_unavailable_reason();

}  // namespace tpcomm::transport
