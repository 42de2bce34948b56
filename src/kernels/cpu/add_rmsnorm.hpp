// The epilogue of all_reduce_rmsnorm on the CPU, one row of `hidden` elements at a time: the
// rows of `ranks` sources summed in float32 in rank order, plus the residual row (if any),
// rounded once to the call's type (the new residual stream); then that rounded row times
// rsqrt(mean of its squares + eps) times the weight, computed in float32 and rounded once (the
// normalised output), as vLLM's fused_add_rms_norm reads the updated residual.
//
// Every variant gives the same bits: the sum of squares goes into 64 partial sums (element i
// into partial i % 64, whatever the vector width) added up in one fixed order, and the file is
// compiled without contracting a multiply and an add into one rounding (-ffp-contract=off).
// The fused shm one-shot calls it with its peers' lanes as sources; the unfused path (gloo, hier)
// with one float32 source, the all-reduced sum.
#pragma once

#include <cstddef>

#include "reduce.hpp"
#include "tpcomm/rmsnorm.hpp"

namespace tpcomm::kernels::cpu {

// out (rows x hidden of `type`) from the sources (each rows x hidden of `source_type`, which is
// `type` or float32). float32, bfloat16 and float16. out may alias a source, residual_out the
// residual: each row is read whole before it is written.
void add_rmsnorm_rows_with(KernelIsa isa, const void* const* srcs, int ranks, DataType source_type,
                           std::size_t rows, DataType type, const RmsNorm& norm, void* out);

}  // namespace tpcomm::kernels::cpu
