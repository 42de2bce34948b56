// What a Gloo call's job needs of its backend, copied so that an abandoned job depends on nothing
// else, and the tags each call uses: shared by the backend (gloo_backend.cpp) and the exchanges
// and rooted calls (gloo_exchange_ops.cpp).
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstdint>
#include <memory>

namespace tpcomm::transport {

// Each call uses two tags: its opening exchange, then its data.
inline std::uint32_t check_tag(std::uint64_t sequence) {
  return static_cast<std::uint32_t>(sequence * 2);
}
inline std::uint32_t data_tag(std::uint64_t sequence) {
  return static_cast<std::uint32_t>(sequence * 2 + 1);
}

// What a job needs of its backend, copied so that an abandoned job depends on nothing else.
struct GlooGroup {
  std::shared_ptr<gloo::Context> context;
  int rank;
  int size;
  std::chrono::milliseconds timeout;
};

}  // namespace tpcomm::transport
