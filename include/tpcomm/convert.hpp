// Element conversion between the wire types and fp32, the type every reduction accumulates in:
// the conversions tpcomm itself uses (F16C where the CPU has it), for callers that fill or check
// fp16/bf16 buffers. fp32 -> fp16/bf16 rounds to nearest even; a NaN stays a NaN. Integer types
// convert too (for filling and checking buffers; tpcomm reduces them exactly, never in fp32):
// fp32 -> integer rounds to nearest even and clamps to the type's range, a NaN becomes 0.
#pragma once

#include <cstddef>

#include "tpcomm/types.hpp"

namespace tpcomm {

// `count` elements of `type` at `src` as fp32.
void to_float(const void* src, DataType type, std::size_t count, float* dst);
// fp32 values rounded into `type` at `dst`.
void from_float(const float* src, DataType type, std::size_t count, void* dst);

}  // namespace tpcomm
