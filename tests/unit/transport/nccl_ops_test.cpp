// tpcomm's reductions as NCCL's: a one-rank average runs as a sum, since NCCL before 2.29.7
// leaves the tail of a one-rank avg unwritten (NVIDIA/nccl#1950, found by the GPU check on an
// H200); every larger group keeps NCCL's own average.
#include <gtest/gtest.h>

#ifdef TPCOMM_HAVE_CUDA
#include "transport/nccl/nccl_ops.hpp"

namespace tpcomm::transport {
namespace {

TEST(NcclOps, OneRankAverageRunsAsASum) {
  EXPECT_EQ(nccl_op(ReduceOp::kAvg, 1), ncclSum);
  for (int world : {2, 3, 8, 16}) EXPECT_EQ(nccl_op(ReduceOp::kAvg, world), ncclAvg) << world;
}

TEST(NcclOps, EveryOtherReductionAndTypeMapsOneToOne) {
  for (int world : {1, 2, 8}) {
    EXPECT_EQ(nccl_op(ReduceOp::kSum, world), ncclSum);
    EXPECT_EQ(nccl_op(ReduceOp::kMax, world), ncclMax);
    EXPECT_EQ(nccl_op(ReduceOp::kMin, world), ncclMin);
  }
  EXPECT_EQ(nccl_type(DataType::kFloat32), ncclFloat32);
  EXPECT_EQ(nccl_type(DataType::kFloat16), ncclFloat16);
  EXPECT_EQ(nccl_type(DataType::kBFloat16), ncclBfloat16);
  EXPECT_EQ(nccl_type(DataType::kInt32), ncclInt32);
  EXPECT_EQ(nccl_type(DataType::kInt64), ncclInt64);
  EXPECT_EQ(nccl_type(DataType::kUInt8), ncclUint8);
}

}  // namespace
}  // namespace tpcomm::transport
#else
TEST(NcclOps, NeedsACudaBuild) {
  GTEST_SKIP() << "built without CUDA (nvcc not found): the NCCL backend is not compiled";
}
#endif
