// The default deadline from TPCOMM_TIMEOUT_MS.
#include "tpcomm/deadline.hpp"

#include "tpcomm/env.hpp"

namespace tpcomm {

std::chrono::milliseconds default_timeout() {
  return std::chrono::milliseconds(env_integer("TPCOMM_TIMEOUT_MS"));
}

Deadline Deadline::from_env() {
  return after(default_timeout());
}

}  // namespace tpcomm
