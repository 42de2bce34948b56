// The multimem backend (sm_90+ with NVSwitch multicast, docs/plan.md): a multicast object bound to
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
#include "transport/common/backend_context.hpp"

namespace tpcomm::transport {

std::unique_ptr<CollectiveBackend> make_multimem_backend(const BackendContext& context);

}  // namespace tpcomm::transport
