// tpcomm's element types and reductions as NCCL's.
#pragma once

#include <nccl.h>

#include "tpcomm/types.hpp"

namespace tpcomm::transport {

inline ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUInt8:
      return ncclUint8;
    case DataType::kFloat32:
      break;
  }
  return ncclFloat32;
}

// The reduction for a group of `world` ranks. A one-rank average is its input, so it runs as a
// sum: NCCL before 2.29.7 leaves the last (count mod blocks) elements of a one-rank avg
// unwritten (NVIDIA/nccl#1950; seen on the H200 by the GPU check's `communicator` part).
inline ncclRedOp_t nccl_op(ReduceOp op, int world) {
  switch (op) {
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kAvg:
      return world == 1 ? ncclSum : ncclAvg;
    case ReduceOp::kSum:
      break;
  }
  return ncclSum;
}

}  // namespace tpcomm::transport
