// The gloo backend: CPU collectives through Gloo's TCP transport, the engine that carries CPU
// groups across nodes. fp16/bf16 are widened to fp32 before Gloo reduces them (Gloo's own
// half-precision arithmetic does not accumulate in fp32).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tpcomm/store.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::transport {

struct GlooConfig {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;  // rendezvous
  std::string key_prefix;        // unique per communicator
  std::chrono::milliseconds timeout{60000};
  std::string hostname = "127.0.0.1";  // the address peers connect to
};

std::unique_ptr<CollectiveBackend> make_gloo_backend(const GlooConfig& config);

}  // namespace tpcomm::transport
