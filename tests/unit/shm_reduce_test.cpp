// The shm reduction kernels against a scalar reference, bit for bit: every dtype and op, 1-5
// ranks, every count from 0 to 100 (each vector width's body and tail) and a few large ones,
// sources at odd offsets, special values (NaN, infinities, signed zeros, denormals, rounding
// ties), and an output aliasing a source.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "transport/common/convert.hpp"
#include "transport/shm/shm_reduce.hpp"

namespace tpcomm {
namespace {

using transport::float_to_bf16;
using transport::float_to_fp16;

std::vector<std::uint32_t> f32_specials() {
  auto bits = [](float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  return {bits(0.0f),     bits(-0.0f),   bits(INFINITY), bits(-INFINITY),   bits(NAN),
          0xffc00001u,    0x00000001u,   0x80400000u,    bits(1.00390625f), bits(1.01171875f),
          bits(65504.0f), bits(3.4e38f), bits(-3.4e38f), 0x3f808000u,       0x3f818000u};
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

// One element as fp32, through the library's conversions (F16C for fp16 where present).
float widen(DataType t, const std::uint8_t* p, std::size_t i) {
  float f;
  transport::to_float(p + i * size_of(t), t, 1, &f);
  return f;
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
    transport::from_float(&acc, t, 1, &out[i * es]);
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

TEST(ShmReduce, EveryTypeOpRankCountAndOffsetMatchesTheScalarReferenceBitForBit) {
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
          transport::shm::reduce_slots(ptrs.data(), ranks, n, t, op, got.data());
          ASSERT_EQ(got.back(), 0xa5) << "wrote past the end";
          got.pop_back();
          expect_same(t, got, want, n);
          if (HasFailure()) {
            FAIL() << to_string(t) << " " << to_string(op) << " ranks=" << ranks << " n=" << n;
          }
          // In place: the output is the last source.
          transport::shm::reduce_slots(ptrs.data(), ranks, n, t, op,
                                       const_cast<std::uint8_t*>(srcs.back()));
          std::vector<std::uint8_t> in_place(srcs.back(), srcs.back() + n * es);
          expect_same(t, in_place, want, n);
          if (HasFailure()) FAIL() << "in place: " << to_string(t) << " " << to_string(op);
          ++cases;
        }
      }
    }
  }
  std::cout << "[ info ] " << cases << " cases bit-identical on " << transport::shm::kernel_isa()
            << "\n";
}

}  // namespace
}  // namespace tpcomm
