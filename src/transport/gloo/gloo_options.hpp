// What the Gloo backend (and hier's Gloo lanes) is built with, beside the group's description
// (BackendContext).
#pragma once

namespace tpcomm::transport {

struct GlooOptions {
  // Small calls travel with the opening exchange (gloo_opening_exchange.hpp); false: every call
  // runs Gloo's own collective, as PyTorch's Gloo users run it (the bench's Gloo baseline).
  // Every rank of a group must have the same: it sets the size of every message.
  bool inline_small_calls = true;
};

}  // namespace tpcomm::transport
