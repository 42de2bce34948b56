// How shm names a call in its errors: the call, its number and "(shm <algorithm>)", from a call
// or from the header a peer posted (which is how a mismatch names both sides).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <fmt/format.h>

#include "transport/common/call_identity.hpp"

namespace tpcomm::transport::shm {

inline std::string describe(const CallIdentity& id, std::uint32_t algorithm) {
  return transport::describe(id,
                             fmt::format("(shm {})", to_string(static_cast<Algorithm>(algorithm))));
}

inline std::string describe(const Call& c, Algorithm algorithm) {
  return describe(identity_of(c), static_cast<std::uint32_t>(algorithm));
}

// A call's description for error messages, built only if one is raised.
using Describe = std::function<std::string()>;
inline Describe describer(const Call& c, Algorithm algorithm) {
  return [&c, algorithm] { return describe(c, algorithm); };
}

}  // namespace tpcomm::transport::shm
