// The GPU check's `rmsnorm` part (rmsnorm_check.cpp): all_reduce_rmsnorm on the custom kernels.
#pragma once

#include "failure_check.hpp"

namespace tpcomm::gpu_check {

// W ranks as threads on GPU 0 (set_up and on_threads as failure_check's):
//  1. one-shot and two-shot x float32, bfloat16, float16 x rows of 64 to 16384 elements (some no
//     multiple of a vector) x 1 to 512 rows, out of place, in place and without a residual,
//     and one call replayed from a CUDA graph: every element of the output and the new residual
//     against a float64 reference from the rounded inputs (2e-5 for float32, 2 units in the last
//     place for 16-bit types), every rank's bytes equal to rank 0's;
//  2. bfloat16, hidden 4096 and 8192, 1-512 rows: time per call of the fused one-shot against
//     the custom one-shot all-reduce followed by the separate add+norm kernel (norm_kernels.cu),
//     as a table.
// Returns 0 when every element is right.
int rmsnorm_check(int world, int blocks, const FailureSetUp& set_up, const OnThreads& on_threads);

}  // namespace tpcomm::gpu_check
