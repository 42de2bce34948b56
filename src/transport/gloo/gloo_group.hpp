// What a Gloo call's job needs of its backend, copied so that an abandoned job depends on nothing
// else, and the tags each call uses: shared by the backend (gloo_backend.cpp) and the exchanges
// and rooted calls (gloo_exchange_ops.cpp).
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string_view>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

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

// Runs `fn`, turning Gloo's exceptions into tpcomm's errors.
template <typename Fn>
auto gloo_translated(Fn fn) {
  try {
    return fn();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // Gloo reports a dead peer or a timeout as an IoException; only the text tells them apart.
    const bool timed_out = std::string_view(e.what()).find("Timed out") != std::string_view::npos;
    throw Error(timed_out ? ErrorCode::kTimeout : ErrorCode::kUnavailable,
                fmt::format("gloo: {}", e.what()));
  }
}

}  // namespace tpcomm::transport
