// The GPU check's `deterministic` part (deterministic_check.cpp): deterministic mode's rank order
// on the device.
#pragma once

#include "failure_check.hpp"

namespace tpcomm::gpu_check {

// W ranks as threads on GPU 0 (set_up and on_threads as failure_check's):
//  1. the custom kernels' all-reduce (one-shot and two-shot) and reduce-scatter of slices [a, b)
//     of 300001 elements, float32, bfloat16 and float16: every rank's bytes equal to the rank-order
//     sum computed on the host (support/typed_values.hpp), so all_reduce(x[a:b]) is
//     all_reduce(x)[a:b] whatever the size and algorithm, and no rank rotates the order;
//  2. the rank-order kernel that NCCL's ordered form ends with
//  (kernels/cuda/ordered_kernel_args.hpp)
//     on the W ranks' inputs laid out as NCCL's all-gather leaves them, at aligned and unaligned
//     offsets: the same bytes;
//  3. that kernel's time for W = 2, 4 and 8 blocks of 64 KiB to 16 MiB of bfloat16, as a table.
// Returns 0 when every result is right.
int deterministic_check(int world, int blocks, const FailureSetUp& set_up,
                        const OnThreads& on_threads);

}  // namespace tpcomm::gpu_check
