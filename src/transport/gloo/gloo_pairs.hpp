// Proof that every Gloo connection came from the rank it claims, before any group data crosses
// it (docs/store.md, "Threat model").
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <memory>

#include "gloo_store_adapter.hpp"

namespace tpcomm::transport {

// Writes this rank's token under the communicator's Gloo prefix, before connecting.
void publish_gloo_member_token(GlooStoreAdapter& adapter, int rank, const Bytes& token);

// Each rank published a fresh random token through the group's (authenticated) store before
// connecting; here every rank sends its token over each pair and checks the one it receives
// against the store's copy. A connection a stranger made to a Gloo port during set-up fails the
// check (kMismatch naming the rank it posed as), before any collective runs.
void verify_gloo_members(gloo::Context& context, GlooStoreAdapter& adapter, const Bytes& my_token,
                         std::chrono::milliseconds timeout);

}  // namespace tpcomm::transport
