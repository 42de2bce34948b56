// The epilogue of Communicator::all_reduce_rmsnorm: the residual add and RMSNorm that follow the
// row-parallel all-reduce in every transformer layer of a tensor-parallel model.
#pragma once

#include <cstddef>

namespace tpcomm {

// Rows of `hidden` elements of the call's type (float32, bfloat16 or float16): the call's count
// is a whole number of rows.
struct RmsNorm {
  // rows x hidden added to the sum before the norm; null: no residual (out = norm of the sum).
  const void* residual = nullptr;
  const void* weight = nullptr;  // hidden elements
  // Where the sum plus residual goes, rounded once to the type (the next residual stream):
  // rows x hidden, `residual` itself for the in-place form. Required with a residual; without
  // one it may receive the rounded sum (the plain all-reduce's result), or be null.
  void* residual_out = nullptr;
  std::size_t hidden = 0;
  float eps = 1e-6f;
};

}  // namespace tpcomm
