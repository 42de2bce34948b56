// Text carried in the stores' and bootstraps' byte buffers (tpcomm::Bytes) and back.
#pragma once

#include <string>

#include "tpcomm/store.hpp"

namespace tpcomm::common {

inline Bytes to_bytes(const std::string& s) {
  return Bytes(s.begin(), s.end());
}
inline std::string to_text(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

}  // namespace tpcomm::common
