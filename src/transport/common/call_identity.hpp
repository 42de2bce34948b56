// What the ranks compare before a call moves data: the call, and the user's call it is a stage of
// (hier). Plain bytes with one layout on every rank: shm posts it in its lane header, Gloo
// sends it in its opening exchange.
#pragma once

#include <cstdint>
#include <cstring>
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
  // all_reduce_rmsnorm (or a stage of one): norm_shape() of its row length and residual.
  std::int32_t root = 0;
  // 1: all_to_allv (its counts are compared by the backend); else all_gatherv's and
  // reduce_scatterv's Call::counts_digest; all_reduce_rmsnorm (or a stage of one): eps's bits
  std::uint32_t per_peer = 0;
  bool operator==(const CallIdentity&) const = default;
};
static_assert(sizeof(CallIdentity) == 40);

// all_reduce_rmsnorm's row length and whether it adds a residual, in CallIdentity::root (the call
// checks keep hidden below 2^30).
inline std::int32_t norm_shape(const RmsNorm& norm) {
  return static_cast<std::int32_t>((norm.hidden << 1) | (norm.residual != nullptr ? 1 : 0));
}

inline std::uint32_t eps_bits(float eps) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &eps, sizeof(bits));
  return bits;
}

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
  // The norm's row length, residual and eps: ranks that differ there would differ in their
  // results, not only in their time.
  if (const RmsNorm* norm = c.outer != nullptr ? c.outer->norm : c.norm) {
    id.root = norm_shape(*norm);
    id.per_peer = eps_bits(norm->eps);
  }
  return id;
}

// "all_reduce(float32 x 512, sum) #2", then `detail` ("(shm one_shot)") when given, then
// " of all_reduce(float32 x 1023, sum)" for a stage.
inline std::string describe(const CallIdentity& id, const std::string& detail = "") {
  const bool outer_rooted = id.has_outer && is_rooted(static_cast<Op>(id.outer_op));
  const bool normed = static_cast<Op>(id.op) == Op::kAllReduceRmsNorm ||
                      (id.has_outer && static_cast<Op>(id.outer_op) == Op::kAllReduceRmsNorm);
  float eps = 0;
  std::memcpy(&eps, &id.per_peer, sizeof(eps));
  const auto hidden = static_cast<std::size_t>(id.root) >> 1;
  const std::string own =
      static_cast<Op>(id.op) == Op::kAllReduceRmsNorm
          ? norm_signature(static_cast<DataType>(id.type), id.count, hidden, id.root & 1, eps)
          : call_signature(static_cast<Op>(id.op), static_cast<DataType>(id.type), id.count,
                           static_cast<ReduceOp>(id.reduce), outer_rooted ? -1 : id.root,
                           id.per_peer != 0 && !normed);
  std::string text =
      fmt::format("{} #{}", id.barrier && !id.has_outer ? "barrier" : own, id.sequence);
  // all_gatherv's and reduce_scatterv's counts: two calls of one sum can differ only there.
  if (id.per_peer > 1 && !normed) text += fmt::format(" (counts digest {:08x})", id.per_peer);
  if (!detail.empty()) text += " " + detail;
  if (id.has_outer && id.barrier) {
    text += " of barrier";
  } else if (id.has_outer && static_cast<Op>(id.outer_op) == Op::kAllReduceRmsNorm) {
    text += " of " + norm_signature(static_cast<DataType>(id.outer_type), id.outer_count, hidden,
                                    id.root & 1, eps);
  } else if (id.has_outer) {
    text +=
        " of " + call_signature(static_cast<Op>(id.outer_op), static_cast<DataType>(id.outer_type),
                                id.outer_count, static_cast<ReduceOp>(id.outer_reduce), id.root);
  }
  return text;
}

}  // namespace tpcomm::transport
