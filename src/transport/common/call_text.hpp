// The one wording of a call in messages: "all_reduce(float32 x 1024, sum)". Built only when a
// message needs it, never on the success path.
#pragma once

#include <string>

#include <fmt/format.h>

#include "backend.hpp"

namespace tpcomm::transport {

inline std::string call_signature(Op op, DataType type, std::uint64_t count, ReduceOp reduce) {
  std::string text = fmt::format("{}({} x {}", to_string(op), to_string(type), count);
  if (op != Op::kAllGather) text += fmt::format(", {}", to_string(reduce));
  return text + ")";
}

inline std::string call_signature(const Call& c) {
  return c.barrier ? "barrier" : call_signature(c.op, c.type, c.count, c.reduce);
}

}  // namespace tpcomm::transport
