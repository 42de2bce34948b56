// What the ranks compare before a call moves data: the call, and the user's call it is a stage of
// (hier). Plain bytes with one layout on every rank: shm posts it in its lane header, Gloo
// sends it in its opening exchange.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "call_text.hpp"

namespace tpcomm::transport {

struct CallIdentity {
  std::uint64_t sequence = 0;  // the communicator's call number
  std::uint64_t count = 0;
  std::uint64_t outer_count = 0;
  std::uint8_t op = 0, type = 0, reduce = 0, has_outer = 0;
  std::uint8_t outer_op = 0, outer_type = 0, outer_reduce = 0, barrier = 0;
  // gather, scatter, reduce: the root; in a stage of one of them, the outer call's root, from
  // which the stage's own follows (hier's stages root where the outer root is).
  std::int32_t root = 0;
  // 1: all_to_allv (its counts are compared by the backend); else all_gatherv's and
  // reduce_scatterv's Call::counts_digest
  std::uint32_t per_peer = 0;
  bool operator==(const CallIdentity&) const = default;
};
static_assert(sizeof(CallIdentity) == 40);

inline CallIdentity identity_of(const Call& c) {
  CallIdentity id;
  id.sequence = c.sequence;
  id.count = c.count;
  id.op = static_cast<std::uint8_t>(c.op);
  id.type = static_cast<std::uint8_t>(c.type);
  id.reduce = static_cast<std::uint8_t>(c.reduce);
  id.root = is_rooted(c.op) ? c.root : 0;
  id.per_peer = c.send_counts != nullptr ? 1 : 0;
  if (c.send_counts == nullptr && c.recv_counts != nullptr) id.per_peer = c.counts_digest;
  id.barrier = (c.outer != nullptr ? c.outer->barrier : c.barrier) ? 1 : 0;
  if (c.outer != nullptr) {
    id.has_outer = 1;
    id.outer_count = c.outer->count;
    id.outer_op = static_cast<std::uint8_t>(c.outer->op);
    id.outer_type = static_cast<std::uint8_t>(c.outer->type);
    id.outer_reduce = static_cast<std::uint8_t>(c.outer->reduce);
    if (is_rooted(c.outer->op)) id.root = c.outer->root;
  }
  return id;
}

// "all_reduce(float32 x 512, sum) #2", then `detail` ("(shm one_shot)") when given, then
// " of all_reduce(float32 x 1023, sum)" for a stage.
inline std::string describe(const CallIdentity& id, const std::string& detail = "") {
  const bool outer_rooted = id.has_outer && is_rooted(static_cast<Op>(id.outer_op));
  const std::string own = call_signature(static_cast<Op>(id.op), static_cast<DataType>(id.type),
                                         id.count, static_cast<ReduceOp>(id.reduce),
                                         outer_rooted ? -1 : id.root, id.per_peer != 0);
  std::string text =
      fmt::format("{} #{}", id.barrier && !id.has_outer ? "barrier" : own, id.sequence);
  // all_gatherv's and reduce_scatterv's counts: two calls of one sum can differ only there.
  if (id.per_peer > 1) text += fmt::format(" (counts digest {:08x})", id.per_peer);
  if (!detail.empty()) text += " " + detail;
  if (id.has_outer && id.barrier) {
    text += " of barrier";
  } else if (id.has_outer) {
    text +=
        " of " + call_signature(static_cast<Op>(id.outer_op), static_cast<DataType>(id.outer_type),
                                id.outer_count, static_cast<ReduceOp>(id.outer_reduce), id.root);
  }
  return text;
}

}  // namespace tpcomm::transport
