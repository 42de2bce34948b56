// A call made of other calls (deterministic mode's gather, all_reduce_rmsnorm's fp32 sum where a
// backend does not fuse it): each part is a stage of the user's call, compared across ranks and
// named in errors as that call.
#pragma once

#include <cstddef>

#include "backend.hpp"

namespace tpcomm::transport {

// A stage of `call`: `op` from `input` into `output`, `count` as that op takes it; the same
// sequence, stream and capture, no counts, norm or ordering of its own, and `outer` the user's
// call (this one, or the one it is itself a stage of: all_reduce_rmsnorm's fp32 sum).
inline Call stage_of(const Call& call, Op op, const void* input, void* output, std::size_t count) {
  Call stage = call;
  stage.op = op;
  stage.input = input;
  stage.output = output;
  stage.count = count;
  stage.reduce = ReduceOp::kSum;
  stage.send_counts = nullptr;
  stage.recv_counts = nullptr;
  stage.counts_digest = 0;
  stage.norm = nullptr;
  stage.ordered = false;
  stage.outer = call.outer != nullptr ? call.outer : &call;
  return stage;
}

}  // namespace tpcomm::transport
