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

namespace tpcomm::transport {

struct CustomConfig {
  int rank = 0;
  int size = 1;
  int device = 0;  // CUDA device ordinal of this rank
  std::shared_ptr<Bootstrap> bootstrap;
  std::uint64_t comm_id = 0;
  std::chrono::milliseconds timeout{60000};
  std::size_t buffer_bytes = 8u << 20;  // each of the two data buffers per rank
  // The plan allows reading peers' buffers in place: captured all-reduces get graph buffer
  // slots that register_graph_buffers() can switch to zero-copy (graph_buffers.hpp).
  bool zero_copy = false;
  // Ranks on several nodes (one NVLink clique, as the plan admitted): the workspaces are shared
  // as fabric handles through the bootstrap instead of POSIX fds over Unix sockets.
  bool cross_node = false;
  // Called from the watchdog thread when a kernel gave up (rank, op, step in the text).
  std::function<void(const std::string&)> on_async_failure;
};

std::unique_ptr<CollectiveBackend> make_custom_backend(const CustomConfig& config);

// Why this process cannot run GPU backends, or empty (driver_api.hpp).
std::string cuda_unavailable_reason();

}  // namespace tpcomm::transport
