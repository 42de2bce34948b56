// The element conversions, each variant by name (F16C and scalar; one this CPU lacks is skipped
// with the reason), against the references written from the bit patterns: every one of the
// 65536 fp16 and bf16 encodings widened, and fp32 values around every rounding boundary, the
// specials and the subnormals narrowed.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/convert.hpp"
#include "support/reference_float.hpp"
#include "tpcomm/convert.hpp"

namespace tpcomm {
namespace {

using kernels::cpu::ConvertIsa;

// fp32 inputs that exercise rounding: every fp16/bf16 value and the midpoints next to it, in
// both signs, plus random values, the specials and the fp32 subnormals.
std::vector<float> narrowing_inputs() {
  std::vector<float> v;
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f16 = test::float_from_fp16(static_cast<std::uint16_t>(h));
    const std::uint32_t b = test::bits_of(f16);
    for (std::uint32_t d : {0u, 0xfffu, 0x1000u, 0x1001u}) v.push_back(test::float_of(b + d));
    const float bf = test::float_from_bf16(static_cast<std::uint16_t>(h));
    const std::uint32_t bb = test::bits_of(bf);
    for (std::uint32_t d : {0u, 0x7fffu, 0x8000u, 0x8001u}) v.push_back(test::float_of(bb + d));
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 100000; ++i) v.push_back(test::float_of(static_cast<std::uint32_t>(rng())));
  for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 65519.99f, 1e-8f,
                  std::ldexp(1.0f, -149), 3.4e38f}) {
    v.push_back(f);
  }
  return v;
}

class ConvertVariant : public ::testing::TestWithParam<ConvertIsa> {
 protected:
  void SetUp() override {
    if (GetParam() == ConvertIsa::kF16c && !kernels::cpu::cpu_has_f16c())
      GTEST_SKIP() << "this CPU has no F16C (and AVX): the F16C variant cannot run here";
  }
};

TEST_P(ConvertVariant, EveryHalfEncodingWidensExactly) {
  std::vector<std::uint16_t> all(0x10000);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) all[h] = static_cast<std::uint16_t>(h);
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    std::vector<float> got(all.size());
    kernels::cpu::to_float_with(GetParam(), all.data(), t, all.size(), got.data());
    int wrong = 0;
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
      const auto x = static_cast<std::uint16_t>(h);
      const float want =
          t == DataType::kFloat16 ? test::float_from_fp16(x) : test::float_from_bf16(x);
      const bool same =
          std::isnan(want) ? std::isnan(got[h]) : test::bits_of(got[h]) == test::bits_of(want);
      if (!same && wrong++ < 5) ADD_FAILURE() << to_string(t) << " 0x" << std::hex << h;
    }
    EXPECT_EQ(wrong, 0) << to_string(t);
  }
}

TEST_P(ConvertVariant, NarrowingRoundsToNearestEvenLikeTheReference) {
  const auto in = narrowing_inputs();
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    std::vector<std::uint16_t> got(in.size());
    kernels::cpu::from_float_with(GetParam(), in.data(), t, in.size(), got.data());
    int wrong = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::uint16_t want =
          t == DataType::kFloat16 ? test::float_to_fp16(in[i]) : test::float_to_bf16(in[i]);
      const bool nan = std::isnan(in[i]);
      const float back =
          t == DataType::kFloat16 ? test::float_from_fp16(got[i]) : test::float_from_bf16(got[i]);
      if ((nan ? !std::isnan(back) : got[i] != want) && wrong++ < 5) {
        ADD_FAILURE() << to_string(t) << ": " << in[i] << " (0x" << std::hex << test::bits_of(in[i])
                      << ") gave 0x" << got[i] << ", expected 0x" << want;
      }
    }
    EXPECT_EQ(wrong, 0) << to_string(t) << " over " << in.size() << " values";
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, ConvertVariant,
                         ::testing::Values(ConvertIsa::kScalar, ConvertIsa::kF16c),
                         [](const ::testing::TestParamInfo<ConvertIsa>& p) {
                           return std::string(p.param == ConvertIsa::kF16c ? "f16c" : "scalar");
                         });

// Integers (for filling and checking buffers): exact both ways where fp32 holds the value;
// fp32 -> integer rounds to nearest even, clamps to the type's range, and takes a NaN as 0.
TEST(ConvertIntegers, RoundToNearestEvenClampAndNanAsZero) {
  const float in[] = {2.5f, 3.5f, -2.5f, -7.0f, 1e10f, -1e10f, 300.0f, -1.0f, NAN, 16777216.0f};
  std::int32_t i32[10];
  from_float(in, DataType::kInt32, 10, i32);
  const std::int32_t want32[] = {2, 4, -2, -7, INT32_MAX, INT32_MIN, 300, -1, 0, 16777216};
  for (int k = 0; k < 10; ++k) EXPECT_EQ(i32[k], want32[k]) << "element " << k;
  std::int64_t i64[10];
  from_float(in, DataType::kInt64, 10, i64);
  const std::int64_t want64[] = {2, 4, -2, -7, 10000000000, -10000000000, 300, -1, 0, 16777216};
  for (int k = 0; k < 10; ++k) EXPECT_EQ(i64[k], want64[k]) << "element " << k;
  std::uint8_t u8[10];
  from_float(in, DataType::kUInt8, 10, u8);
  const std::uint8_t want8[] = {2, 4, 0, 0, 255, 0, 255, 0, 0, 255};
  for (int k = 0; k < 10; ++k) EXPECT_EQ(u8[k], want8[k]) << "element " << k;
  float back[10];
  to_float(want32, DataType::kInt32, 10, back);
  EXPECT_EQ(back[3], -7.0f);
  EXPECT_EQ(back[9], 16777216.0f);
  to_float(want8, DataType::kUInt8, 10, back);
  EXPECT_EQ(back[4], 255.0f);
  to_float(want64, DataType::kInt64, 10, back);
  EXPECT_EQ(back[4], 1e10f);
}

}  // namespace
}  // namespace tpcomm
