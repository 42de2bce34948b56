// The shm reduction kernels against a scalar reference, bit for bit: every ISA variant this CPU
// runs (each called by name; a variant it cannot run is reported as skipped with the reason),
// every dtype and op, 1-5 ranks, every count from 0 to 100 (each vector width's body and tail)
// and a few large ones, sources at odd offsets, special values (NaN, infinities, signed zeros,
// denormals, rounding ties), and an output aliasing a source. The reference widens and rounds
// from the bit patterns, written here, not with the library's conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/sum_by_pages.hpp"
#include "support/reference_float.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm {
namespace {

using kernels::cpu::KernelIsa;

using test::bits_of;
using test::float_from_bf16;
using test::float_from_fp16;
using test::float_to_bf16;
using test::float_to_fp16;

std::vector<std::uint32_t> f32_specials() {
  auto bits = [](float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  return {bits(0.0f), bits(-0.0f), bits(INFINITY), bits(-INFINITY), bits(NAN), 0xffc00001u,
          0x00000001u, 0x80400000u, bits(1.00390625f), bits(1.01171875f), bits(65504.0f),
          bits(3.4e38f), bits(-3.4e38f), 0x3f808000u, 0x3f818000u,
          // Signalling NaNs: payload in bf16's half (0x7f81 as bf16), and in the low bits only.
          0x7f810000u, 0xff800001u, 0x7f7fffffu, 0xff7f8000u};
}

// Random values of one element type, with specials mixed in, as raw bits.
std::vector<std::uint32_t> random_elements(DataType t, std::size_t n, std::mt19937& rng) {
  const auto specials = f32_specials();
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  std::vector<std::uint32_t> out(n);
  for (auto& e : out) {
    std::uint32_t f;
    if (rng() % 8 == 0) {
      f = specials[rng() % specials.size()];
    } else {
      const float v = value(rng);
      std::memcpy(&f, &v, 4);
    }
    if (t == DataType::kFloat32) {
      e = f;
    } else {
      float v;
      std::memcpy(&v, &f, 4);
      // Half-precision bit patterns (ties and NaNs included) straight from the raw bits too.
      e = rng() % 4 == 0 ? (f >> 16)
                         : (t == DataType::kBFloat16 ? float_to_bf16(v) : float_to_fp16(v));
    }
  }
  return out;
}

// One element as fp32, decoded from its bits.
float widen(DataType t, const std::uint8_t* p, std::size_t i) {
  if (t == DataType::kFloat32) {
    float f;
    std::memcpy(&f, p + i * 4, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p + i * 2, 2);
  return t == DataType::kBFloat16 ? float_from_bf16(h) : float_from_fp16(h);
}

void narrow(DataType t, float v, std::uint8_t* p) {
  if (t == DataType::kFloat32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const std::uint16_t h = t == DataType::kBFloat16 ? float_to_bf16(v) : float_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// The documented semantics, one element at a time: widen, fold in rank order, round once.
std::vector<std::uint8_t> reference(DataType t, ReduceOp op,
                                    const std::vector<const std::uint8_t*>& srcs, std::size_t n) {
  const std::size_t es = size_of(t);
  std::vector<std::uint8_t> out(n * es);
  for (std::size_t i = 0; i < n; ++i) {
    float acc = widen(t, srcs[0], i);
    for (std::size_t r = 1; r < srcs.size(); ++r) {
      const float x = widen(t, srcs[r], i);
      if (op == ReduceOp::kMax) {
        acc = acc < x ? x : acc;
      } else if (op == ReduceOp::kMin) {
        acc = x < acc ? x : acc;
      } else {
        acc += x;
      }
    }
    if (op == ReduceOp::kAvg) acc /= static_cast<float>(srcs.size());
    narrow(t, acc, &out[i * es]);
  }
  return out;
}

bool is_nan(DataType t, const std::uint8_t* p, std::size_t i) {
  return std::isnan(widen(t, p, i));
}

// Bit for bit, except that a NaN result may carry another NaN's payload: when two NaNs meet, the
// compiler may order the operands of an addition either way (C++ leaves the payload unspecified),
// so only NaN-ness is part of the contract there.
void expect_same(DataType t, const std::vector<std::uint8_t>& got,
                 const std::vector<std::uint8_t>& want, std::size_t n) {
  const std::size_t es = size_of(t);
  for (std::size_t i = 0; i < n; ++i) {
    if (is_nan(t, want.data(), i)) {
      EXPECT_TRUE(is_nan(t, got.data(), i)) << "element " << i << " should be NaN";
    } else {
      EXPECT_EQ(std::memcmp(&got[i * es], &want[i * es], es), 0)
          << "element " << i << ": " << widen(t, got.data(), i) << " instead of "
          << widen(t, want.data(), i);
    }
  }
}

// The reference conversions themselves, against values whose encodings are known.
TEST(ShmReduceReference, ConversionsRoundToNearestEvenFromTheBits) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00u);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bffu);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00u);               // halfway to 65536: even is infinity
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000u);  // its half: tie to even (zero)
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -26)), 0x0001u);  // above the tie
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);      // tie: stays even
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u);  // tie: up to even
  EXPECT_EQ(float_to_fp16(-2.0f), 0xc000u);
  EXPECT_EQ(float_from_fp16(0x0001u), std::ldexp(1.0f, -24));
  EXPECT_EQ(float_from_fp16(0xfbffu), -65504.0f);
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80u);  // tie: stays even
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3f82u);  // tie: up to even
  EXPECT_EQ(float_to_bf16(3.4e38f), 0x7f80u);      // rounds up to infinity
  EXPECT_TRUE(std::isnan(float_from_bf16(float_to_bf16(NAN))));
  EXPECT_TRUE(std::isnan(float_from_fp16(float_to_fp16(NAN))));
}

class ShmReduce : public ::testing::TestWithParam<KernelIsa> {};

TEST_P(ShmReduce, EveryTypeOpRankCountAndOffsetMatchesTheScalarReferenceBitForBit) {
  const KernelIsa isa = GetParam();
  if (!kernels::cpu::cpu_runs(isa)) {
    GTEST_SKIP() << "the " << kernels::cpu::to_string(isa)
                 << " variant needs an instruction set this CPU lacks (best here: "
                 << transport::cpu::kernel_isa() << ")";
  }
  std::mt19937 rng(7);
  std::vector<std::size_t> counts;
  for (std::size_t n = 0; n <= 100; ++n) counts.push_back(n);
  for (std::size_t n : {1023u, 1024u, 1025u, 4099u}) counts.push_back(n);
  int cases = 0;
  for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    const std::size_t es = size_of(t);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
      for (int ranks = 1; ranks <= 5; ++ranks) {
        for (std::size_t n : counts) {
          const std::size_t offset = n % 3;  // elements: sources not 64-byte aligned
          std::vector<std::vector<std::uint8_t>> data(static_cast<std::size_t>(ranks));
          std::vector<const std::uint8_t*> srcs;
          for (auto& d : data) {
            const auto bits = random_elements(t, n + offset, rng);
            d.resize((n + offset) * es);
            for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(&d[i * es], &bits[i], es);
            srcs.push_back(d.data() + offset * es);
          }
          const auto want = reference(t, op, srcs, n);
          std::vector<std::uint8_t> got(n * es + 1, 0xa5);  // one guard byte
          std::vector<const void*> ptrs(srcs.begin(), srcs.end());
          kernels::cpu::reduce_slots_with(isa, ptrs.data(), ranks, n, t, op, got.data());
          ASSERT_EQ(got.back(), 0xa5) << "wrote past the end";
          got.pop_back();
          expect_same(t, got, want, n);
          if (HasFailure()) {
            FAIL() << to_string(t) << " " << to_string(op) << " ranks=" << ranks << " n=" << n;
          }
          // In place: the output is the last source.
          kernels::cpu::reduce_slots_with(isa, ptrs.data(), ranks, n, t, op,
                                          const_cast<std::uint8_t*>(srcs.back()));
          std::vector<std::uint8_t> in_place(srcs.back(), srcs.back() + n * es);
          expect_same(t, in_place, want, n);
          if (HasFailure()) FAIL() << "in place: " << to_string(t) << " " << to_string(op);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 4 * 5 * static_cast<int>(counts.size()));
  std::cout << "[ info ] " << cases << " cases bit-identical on the "
            << kernels::cpu::to_string(isa) << " variant\n";
}

// shm's W = 2 float32 sum by pages: the same bits as the scalar reference over one group of 8
// pages, several with a tail, and less than one, from unaligned sources, in and out of place.
TEST_P(ShmReduce, TheSumByPagesMatchesTheScalarReferenceBitForBit) {
  const KernelIsa isa = GetParam();
  if (!kernels::cpu::cpu_runs(isa)) {
    GTEST_SKIP() << "the " << kernels::cpu::to_string(isa) << " variant needs an instruction set "
                 << "this CPU lacks (best here: " << transport::cpu::kernel_isa() << ")";
  }
  std::mt19937 rng(11);
  for (std::size_t n : {0u, 5u, 8191u, 8192u, 8193u, 3 * 8192u + 77u}) {
    const std::size_t offset = n % 3;
    std::vector<std::vector<std::uint8_t>> data(2);
    std::vector<const std::uint8_t*> srcs;
    for (auto& d : data) {
      const auto bits = random_elements(DataType::kFloat32, n + offset, rng);
      d.resize((n + offset) * 4);
      for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(&d[i * 4], &bits[i], 4);
      srcs.push_back(d.data() + offset * 4);
    }
    const auto want = reference(DataType::kFloat32, ReduceOp::kSum, srcs, n);
    std::vector<std::uint8_t> got(n * 4 + 1, 0xa5);
    std::vector<const void*> ptrs(srcs.begin(), srcs.end());
    kernels::cpu::sum_two_f32_by_pages_with(isa, ptrs.data(), n, got.data());
    ASSERT_EQ(got.back(), 0xa5) << "wrote past the end, n=" << n;
    got.pop_back();
    expect_same(DataType::kFloat32, got, want, n);
    if (HasFailure()) FAIL() << "n=" << n;
    kernels::cpu::sum_two_f32_by_pages_with(isa, ptrs.data(), n,
                                            const_cast<std::uint8_t*>(srcs.front()));
    std::vector<std::uint8_t> in_place(srcs.front(), srcs.front() + n * 4);
    expect_same(DataType::kFloat32, in_place, want, n);
    if (HasFailure()) FAIL() << "in place, n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, ShmReduce,
                         ::testing::Values(KernelIsa::kBaseline, KernelIsa::kAvx2,
                                           KernelIsa::kAvx512, KernelIsa::kAvx512Bf16),
                         [](const ::testing::TestParamInfo<KernelIsa>& p) {
                           return std::string(kernels::cpu::to_string(p.param));
                         });

}  // namespace
}  // namespace tpcomm
