// The one wording of a call in messages: "all_reduce(float32 x 1024, sum)", "gather(int64 x 4,
// root 1)", "all_to_allv(bfloat16)". Built only when a message needs it, never on the success
// path.
#pragma once

#include <string>

#include <fmt/format.h>

#include "backend.hpp"

namespace tpcomm::transport {

// `per_peer_counts`: all_to_allv, all_gatherv or reduce_scatterv (`count` then their sum). A
// negative `root` is left out (a stage whose root follows from its outer call's).
inline std::string call_signature(Op op, DataType type, std::uint64_t count, ReduceOp reduce,
                                  int root = 0, bool per_peer_counts = false) {
  if (op == Op::kAllToAll && per_peer_counts) {
    return fmt::format("all_to_allv({})", to_string(type));
  }
  std::string text = fmt::format("{}{}({} x {}", to_string(op), per_peer_counts ? "v" : "",
                                 to_string(type), count);
  if (reduces(op)) text += fmt::format(", {}", to_string(reduce));
  if (is_rooted(op) && root >= 0) text += fmt::format(", root {}", root);
  return text + ")";
}

// "all_reduce_rmsnorm(bfloat16 x 8192, rows of 4096, residual, eps 1e-06)".
inline std::string norm_signature(DataType type, std::uint64_t count, std::size_t hidden,
                                  bool residual, float eps) {
  return fmt::format("all_reduce_rmsnorm({} x {}, rows of {}{}, eps {:g})", to_string(type), count,
                     hidden, residual ? ", residual" : "", eps);
}

inline std::string call_signature(const Call& c) {
  if (c.norm != nullptr) {
    return norm_signature(c.type, c.count, c.norm->hidden, c.norm->residual != nullptr,
                          c.norm->eps);
  }
  return c.barrier ? "barrier"
                   : call_signature(c.op, c.type, c.count, c.reduce, c.root,
                                    c.send_counts != nullptr || c.recv_counts != nullptr);
}

}  // namespace tpcomm::transport
