// Integer reductions, through every shm kernel variant (they share int_reduce's loop) and the
// helpers Gloo and hier use, against a reference written here: sums wrap around as two's
// complement (computed in unsigned 64-bit arithmetic and truncated), max and min by value.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/int_reduce.hpp"
#include "kernels/cpu/reduce.hpp"
#include "tpcomm/tuning.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm {
namespace {

using kernels::cpu::KernelIsa;

// Element i of a buffer of `type` as a signed 64-bit value (uint8 zero-extended).
std::int64_t element(DataType type, const std::uint8_t* p, std::size_t i) {
  switch (type) {
    case DataType::kInt32: {
      std::int32_t v;
      std::memcpy(&v, p + i * 4, 4);
      return v;
    }
    case DataType::kInt64: {
      std::int64_t v;
      std::memcpy(&v, p + i * 8, 8);
      return v;
    }
    default:
      return p[i];
  }
}

// The bytes of `v` truncated to `type` (two's complement), little-endian.
std::vector<std::uint8_t> bytes_of(DataType type, std::uint64_t v) {
  std::vector<std::uint8_t> out(size_of(type));
  for (std::size_t b = 0; b < out.size(); ++b) out[b] = static_cast<std::uint8_t>(v >> (8 * b));
  return out;
}

std::vector<std::uint8_t> reference(DataType type, ReduceOp op,
                                    const std::vector<std::vector<std::uint8_t>>& srcs,
                                    std::size_t n) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t best = element(type, srcs[0].data(), i);
    std::uint64_t sum = static_cast<std::uint64_t>(best);
    for (std::size_t r = 1; r < srcs.size(); ++r) {
      const std::int64_t v = element(type, srcs[r].data(), i);
      sum += static_cast<std::uint64_t>(v);
      if (op == ReduceOp::kMax && v > best) best = v;
      if (op == ReduceOp::kMin && v < best) best = v;
    }
    const auto bytes =
        bytes_of(type, op == ReduceOp::kSum ? sum : static_cast<std::uint64_t>(best));
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

// Values that cross every edge: the type's extremes (so sums wrap), zero, -1, and random bits.
std::vector<std::uint8_t> random_buffer(DataType type, std::size_t n, std::mt19937_64& rng) {
  const std::size_t es = size_of(type);
  std::vector<std::uint8_t> out(n * es);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t v = rng();
    switch (rng() % 6) {
      case 0:
        v = 0;
        break;
      case 1:
        v = ~std::uint64_t{0};  // -1, or 255 as uint8
        break;
      case 2:  // the type's largest: 0x7f.. (signed) or 0xff (uint8)
        v = type == DataType::kUInt8 ? 0xff : (std::uint64_t{1} << (8 * es - 1)) - 1;
        break;
      case 3:  // the smallest signed: 0x80..
        v = std::uint64_t{1} << (8 * es - 1);
        break;
      default:
        break;
    }
    const auto bytes = bytes_of(type, v);
    std::memcpy(out.data() + i * es, bytes.data(), es);
  }
  return out;
}

class IntReduce : public ::testing::TestWithParam<KernelIsa> {};

TEST_P(IntReduce, EveryTypeOpAndRankCountMatchesTheReferenceInPlaceOrNot) {
  const KernelIsa isa = GetParam();
  if (!kernels::cpu::cpu_runs(isa)) {
    GTEST_SKIP() << "the " << kernels::cpu::to_string(isa)
                 << " variant needs an instruction set this CPU lacks (best here: "
                 << transport::cpu::kernel_isa() << ")";
  }
  std::mt19937_64 rng(11);
  int cases = 0;
  for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kUInt8}) {
    const std::size_t es = size_of(t);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      for (int ranks = 1; ranks <= 5; ++ranks) {
        for (std::size_t n : {0u, 1u, 7u, 64u, 1001u}) {
          std::vector<std::vector<std::uint8_t>> data;
          for (int r = 0; r < ranks; ++r) data.push_back(random_buffer(t, n, rng));
          const auto want = reference(t, op, data, n);
          std::vector<const void*> ptrs;
          for (const auto& d : data) ptrs.push_back(d.data());
          std::vector<std::uint8_t> got(n * es + 1, 0xa5);  // one guard byte
          kernels::cpu::reduce_slots_with(isa, ptrs.data(), ranks, n, t, op, got.data());
          ASSERT_EQ(got.back(), 0xa5) << "wrote past the end";
          got.pop_back();
          ASSERT_EQ(got, want) << to_string(t) << " " << to_string(op) << " ranks " << ranks
                               << " n " << n;
          // In place into the last source (a rank's own input in an in-place call).
          kernels::cpu::reduce_slots_with(isa, ptrs.data(), ranks, n, t, op, data.back().data());
          ASSERT_EQ(data.back(), want) << "in place: " << to_string(t) << " " << to_string(op)
                                       << " ranks " << ranks << " n " << n;
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 3 * 5 * 5);
}

INSTANTIATE_TEST_SUITE_P(EveryVariant, IntReduce, ::testing::ValuesIn(kernels::cpu::kAllKernelIsas),
                         [](const ::testing::TestParamInfo<KernelIsa>& p) {
                           return std::string(kernels::cpu::to_string(p.param));
                         });

// Gloo's reduce function: the output is the first of the two sources.
TEST(IntReduce, FoldsASecondBufferIntoTheFirst) {
  std::mt19937_64 rng(5);
  for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kUInt8}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      std::vector<std::vector<std::uint8_t>> data = {random_buffer(t, 333, rng),
                                                     random_buffer(t, 333, rng)};
      const auto want = reference(t, op, data, 333);
      const void* both[] = {data[0].data(), data[1].data()};
      kernels::cpu::reduce_ints(both, 2, 333, t, op, data[0].data());
      EXPECT_EQ(data[0], want) << to_string(t) << " " << to_string(op);
    }
  }
}

TEST(IntReduce, ExtremesWrapAndCompareAsTheirTypeDoes) {
  // Written out, independent of the reference above.
  const std::int32_t a32[] = {INT32_MAX, INT32_MIN, -1};
  const std::int32_t b32[] = {1, -1, 1};
  std::int32_t s32[3];
  const void* srcs32[] = {a32, b32};
  kernels::cpu::reduce_ints(srcs32, 2, 3, DataType::kInt32, ReduceOp::kSum, s32);
  EXPECT_EQ(s32[0], INT32_MIN);
  EXPECT_EQ(s32[1], INT32_MAX);
  EXPECT_EQ(s32[2], 0);
  kernels::cpu::reduce_ints(srcs32, 2, 3, DataType::kInt32, ReduceOp::kMin, s32);
  EXPECT_EQ(s32[0], 1);
  EXPECT_EQ(s32[1], INT32_MIN);
  EXPECT_EQ(s32[2], -1);
  const std::uint8_t a8[] = {200, 0, 255};
  const std::uint8_t b8[] = {100, 255, 1};
  std::uint8_t s8[3];
  const void* srcs8[] = {a8, b8};
  kernels::cpu::reduce_ints(srcs8, 2, 3, DataType::kUInt8, ReduceOp::kSum, s8);
  EXPECT_EQ(s8[0], 44);
  EXPECT_EQ(s8[1], 255);
  EXPECT_EQ(s8[2], 0);
  kernels::cpu::reduce_ints(srcs8, 2, 3, DataType::kUInt8, ReduceOp::kMax, s8);
  EXPECT_EQ(s8[0], 200);  // unsigned: 200 > 100 and 255 > 0
  EXPECT_EQ(s8[1], 255);
  EXPECT_EQ(s8[2], 255);
  const std::int64_t a64[] = {INT64_MAX, INT64_MIN};
  const std::int64_t b64[] = {INT64_MAX, INT64_MIN};
  std::int64_t s64[2];
  const void* srcs64[] = {a64, b64};
  kernels::cpu::reduce_ints(srcs64, 2, 2, DataType::kInt64, ReduceOp::kSum, s64);
  EXPECT_EQ(s64[0], -2);
  EXPECT_EQ(s64[1], 0);
}

TEST(IntReduce, CudaKernelsHandIntegerCallsToNccl) {
  for (Backend b : {Backend::kCustom, Backend::kMultimem}) {
    for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kUInt8}) {
      EXPECT_EQ(backend_for_type(b, t), Backend::kNccl) << to_string(b) << to_string(t);
    }
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
      EXPECT_EQ(backend_for_type(b, t), std::nullopt) << to_string(b) << to_string(t);
    }
  }
  for (Backend b :
       {Backend::kLocal, Backend::kNccl, Backend::kShm, Backend::kGloo, Backend::kHier}) {
    EXPECT_EQ(backend_for_type(b, DataType::kInt64), std::nullopt) << to_string(b);
  }
}

}  // namespace
}  // namespace tpcomm
