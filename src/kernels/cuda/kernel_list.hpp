// Every custom kernel instantiation, in one place: element type (with its kernel_code for
// tpcomm::DataType, custom_kernel_args.hpp) x world-size bucket. A group of W ranks runs the
// kernel of the smallest bucket >= W (cuda_layout.hpp: world_bucket), so its per-thread arrays
// are sized for at most twice its ranks and two ranks never pay for sixteen. The operation
// (one-shot, two-shot, all-gather, reduce-scatter) is a uniform run-time branch inside.
#pragma once

#define TPCOMM_CUSTOM_KERNELS(X)              \
  X(float, kernel_code::kFloat32, 2)          \
  X(float, kernel_code::kFloat32, 4)          \
  X(float, kernel_code::kFloat32, 8)          \
  X(float, kernel_code::kFloat32, 16)         \
  X(__half, kernel_code::kFloat16, 2)         \
  X(__half, kernel_code::kFloat16, 4)         \
  X(__half, kernel_code::kFloat16, 8)         \
  X(__half, kernel_code::kFloat16, 16)        \
  X(__nv_bfloat16, kernel_code::kBFloat16, 2) \
  X(__nv_bfloat16, kernel_code::kBFloat16, 4) \
  X(__nv_bfloat16, kernel_code::kBFloat16, 8) \
  X(__nv_bfloat16, kernel_code::kBFloat16, 16)

// The one run-time dispatch of a kernel family: returns launch<T, MaxW>(args, stream) for the
// instantiation of args.type and args.world's bucket, or cudaErrorInvalidValue. Used in the body
// of each family's launch function, where `launch` is its launch template.
#define TPCOMM_DISPATCH_ONE(T, TYPE_ID, MAXW) \
  if (args.type == TYPE_ID && bucket == MAXW) return launch<T, MAXW>(args, stream);
#define TPCOMM_DISPATCH_BY_TYPE_AND_WORLD(ARGS, STREAM) \
  do {                                                  \
    const auto& args = (ARGS);                          \
    const auto stream = (STREAM);                       \
    const int bucket = world_bucket(args.world);        \
    TPCOMM_CUSTOM_KERNELS(TPCOMM_DISPATCH_ONE)          \
    return static_cast<int>(cudaErrorInvalidValue);     \
  } while (false)
