// The defaults of CollectiveBackend (backend.hpp): a backend the plan never gives send_recv has
// no point-to-point.
#include "backend.hpp"

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {

std::uint64_t CollectiveBackend::start(const PeerMessage&) {
  throw Error(ErrorCode::kInternal,
              fmt::format("{} has no point-to-point messages", to_string(kind())));
}

int CollectiveBackend::wait(std::uint64_t, const Deadline&) {
  throw Error(ErrorCode::kInternal,
              fmt::format("{} has no point-to-point messages", to_string(kind())));
}

}  // namespace tpcomm::transport
