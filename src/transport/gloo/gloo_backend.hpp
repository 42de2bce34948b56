// The gloo backend: CPU collectives through Gloo's TCP transport, the engine that carries CPU
// groups across nodes. fp16/bf16 are widened to fp32 before Gloo reduces them (Gloo's own
// half-precision arithmetic does not accumulate in fp32).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tpcomm/store.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"

namespace tpcomm::transport {

std::unique_ptr<CollectiveBackend> make_gloo_backend(const BackendContext& context);

}  // namespace tpcomm::transport
