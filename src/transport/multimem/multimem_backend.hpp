// The multimem backend (sm_90+ with NVSwitch multicast, DESIGN §3): a multicast object bound to
// every rank's workspace, and kernels that reduce in the switch (multimem_kernels.cu). Set-up is
// four voted steps: workspace (and the object, on rank 0), share (the object's descriptor to
// every rank, each adds its device), bind (each binds its workspace and maps the object, after
// every device was added), probe (a real reduction through the switch is checked).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "tpcomm/bootstrap.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::transport {

struct MultimemConfig {
  int rank = 0;
  int size = 1;
  int device = 0;
  std::shared_ptr<Bootstrap> bootstrap;
  std::uint64_t comm_id = 0;
  std::chrono::milliseconds timeout{60000};
  std::size_t area_bytes = 8u << 20;  // each of the two data areas per rank
  // Ranks on several nodes (sm_100, one NVLink clique, as the plan admitted): the object and
  // the workspaces use fabric handles, passed through the bootstrap.
  bool cross_node = false;
  std::function<void(const std::string&)> on_async_failure;
};

std::unique_ptr<CollectiveBackend> make_multimem_backend(const MultimemConfig& config);

}  // namespace tpcomm::transport
