// The add + RMSNorm epilogue (kernels/cpu/add_rmsnorm.hpp) against references written here:
// the new residual bit for bit against a scalar float32 sum in rank order rounded once (the
// reference's own conversions), the normalised output within 2e-5 relative (float32) or 2 units
// in the last place (bfloat16, float16) of a float64 computation from the rounded residual; and
// every ISA variant this CPU runs bit for bit against the baseline. Rank- and element-dependent
// values, 1-4 sources, hidden sizes that are and are not multiples of every vector width, with
// and without a residual, float32 sources for a narrow type (the unfused path), and outputs over
// their inputs (vLLM's in-place form).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/add_rmsnorm.hpp"
#include "support/reference_float.hpp"

namespace tpcomm {
namespace {

using kernels::cpu::KernelIsa;
using tpcomm::RmsNorm;

// Values in [-4, 4) with full float32 mantissas (so that every rounding shows), different for
// every rank, row and element; the residual is rank -1.
float value(int rank, std::size_t row, std::size_t i) {
  const std::uint64_t k = static_cast<std::uint64_t>(rank + 3) * 1000003u + row * 7919u + i;
  return static_cast<float>((k * 2654435761u) % 1000003u) / 125000.375f - 4.0f;
}

// A buffer of `n` elements of `type` holding `values` rounded (reference conversions).
std::vector<std::uint8_t> encode(DataType type, const std::vector<float>& values) {
  std::vector<std::uint8_t> out(values.size() * size_of(type));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (type == DataType::kFloat32) {
      std::memcpy(&out[i * 4], &values[i], 4);
    } else {
      const std::uint16_t h = type == DataType::kBFloat16 ? test::float_to_bf16(values[i])
                                                          : test::float_to_fp16(values[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

float decode(DataType type, const std::uint8_t* p, std::size_t i) {
  if (type == DataType::kFloat32) {
    float v;
    std::memcpy(&v, p + i * 4, 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, p + i * 2, 2);
  return type == DataType::kBFloat16 ? test::float_from_bf16(h) : test::float_from_fp16(h);
}

// Units in the last place between two finite values of a 16-bit type, by their bit patterns.
int ulps16(DataType type, float a, float b) {
  const std::uint16_t x =
      type == DataType::kBFloat16 ? test::float_to_bf16(a) : test::float_to_fp16(a);
  const std::uint16_t y =
      type == DataType::kBFloat16 ? test::float_to_bf16(b) : test::float_to_fp16(b);
  auto ordered = [](std::uint16_t h) { return h & 0x8000 ? -(h & 0x7fff) : (h & 0x7fff); };
  return std::abs(ordered(x) - ordered(y));
}

struct Case {
  DataType type;
  DataType source_type;
  int ranks;
  std::size_t rows;
  std::size_t hidden;
  bool residual;
  bool in_place;
};

std::string name(const Case& c) {
  return std::string(to_string(c.type)) + " from " + std::string(to_string(c.source_type)) + ", " +
         std::to_string(c.ranks) + " sources, " + std::to_string(c.rows) + "x" +
         std::to_string(c.hidden) + (c.residual ? ", residual" : ", no residual") +
         (c.in_place ? ", in place" : "");
}

// Runs one case through `isa`; returns out and the new residual (empty without one).
std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> run(const Case& c, KernelIsa isa) {
  const std::size_t n = c.rows * c.hidden;
  std::vector<std::vector<std::uint8_t>> sources;
  for (int r = 0; r < c.ranks; ++r) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = value(r, i / c.hidden, i % c.hidden);
    sources.push_back(encode(c.source_type, v));
  }
  std::vector<float> res(n), w(c.hidden);
  for (std::size_t i = 0; i < n; ++i) res[i] = value(-1, i / c.hidden, i % c.hidden);
  for (std::size_t i = 0; i < c.hidden; ++i) w[i] = 0.5f + static_cast<float>(i % 11) / 8.0f;
  std::vector<std::uint8_t> residual = encode(c.type, res), weight = encode(c.type, w);
  std::vector<std::uint8_t> out(n * size_of(c.type), 0xee), residual_out(residual.size(), 0xee);
  std::vector<const void*> srcs;
  for (const auto& s : sources) srcs.push_back(s.data());
  RmsNorm norm;
  norm.hidden = c.hidden;
  norm.eps = 1e-5f;
  norm.weight = weight.data();
  if (c.residual) {
    norm.residual = residual.data();
    norm.residual_out = c.in_place ? residual.data() : residual_out.data();
  }
  void* o = c.in_place ? static_cast<void*>(sources[0].data()) : out.data();
  kernels::cpu::add_rmsnorm_rows_with(isa, srcs.data(), c.ranks, c.source_type, c.rows, c.type,
                                      norm, o);
  std::vector<std::uint8_t> got(static_cast<std::uint8_t*>(o),
                                static_cast<std::uint8_t*>(o) + n * size_of(c.type));
  if (!c.residual) return {got, {}};
  return {got, c.in_place ? residual : residual_out};
}

// The case against the references, through the baseline variant.
void check_against_reference(const Case& c) {
  SCOPED_TRACE(name(c));
  const auto [out, new_residual] = run(c, KernelIsa::kBaseline);
  int wrong = 0;
  for (std::size_t row = 0; row < c.rows; ++row) {
    std::vector<float> kept(c.hidden);
    double squares = 0;
    for (std::size_t i = 0; i < c.hidden; ++i) {
      // The sum in float32, rank order, of the dtype-rounded inputs, then the residual.
      float acc = 0;
      for (int r = 0; r < c.ranks; ++r) {
        const float in = decode(c.source_type, encode(c.source_type, {value(r, row, i)}).data(), 0);
        acc = r == 0 ? in : acc + in;
      }
      if (c.residual) acc += decode(c.type, encode(c.type, {value(-1, row, i)}).data(), 0);
      kept[i] = decode(c.type, encode(c.type, {acc}).data(), 0);
      if (c.residual && decode(c.type, new_residual.data(), row * c.hidden + i) != kept[i]) ++wrong;
      squares += static_cast<double>(kept[i]) * kept[i];
    }
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(c.hidden) + 1e-5);
    for (std::size_t i = 0; i < c.hidden; ++i) {
      const double w =
          decode(c.type, encode(c.type, {0.5f + static_cast<float>(i % 11) / 8.0f}).data(), 0);
      const double want = kept[i] * inv * w;
      const float got = decode(c.type, out.data(), row * c.hidden + i);
      const bool near = c.type == DataType::kFloat32
                            ? std::abs(got - want) <= 2e-5 * std::abs(want) + 1e-30
                            : ulps16(c.type, got, static_cast<float>(want)) <= 2;
      if (!near && ++wrong <= 3) {
        ADD_FAILURE() << "row " << row << " element " << i << ": " << got << ", want " << want;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    const std::vector<DataType> sources = type == DataType::kFloat32
                                              ? std::vector<DataType>{type}
                                              : std::vector<DataType>{type, DataType::kFloat32};
    for (DataType source : sources) {
      for (std::size_t hidden : {1u, 7u, 16u, 64u, 100u, 4099u}) {
        for (int ranks : {1, 2, 4}) all.push_back({type, source, ranks, 3, hidden, true, false});
        all.push_back({type, source, 2, 2, hidden, false, false});
        all.push_back({type, source, 2, 2, hidden, true, true});
        all.push_back({type, source, 3, 1, hidden, false, true});
      }
    }
  }
  return all;
}

TEST(AddRmsNorm, TheBaselineMatchesTheReferenceForEveryTypeAndShape) {
  for (const Case& c : cases()) check_against_reference(c);
}

class AddRmsNormVariants : public ::testing::TestWithParam<KernelIsa> {};

TEST_P(AddRmsNormVariants, GiveTheBaselinesBitsForEveryTypeAndShape) {
  const KernelIsa isa = GetParam();
  if (!kernels::cpu::cpu_runs(isa)) {
    GTEST_SKIP() << "the " << kernels::cpu::to_string(isa)
                 << " variant needs an instruction set this CPU lacks";
  }
  for (const Case& c : cases()) {
    SCOPED_TRACE(name(c));
    const auto want = run(c, KernelIsa::kBaseline);
    const auto got = run(c, isa);
    EXPECT_TRUE(got.first == want.first) << "output differs from the baseline's";
    EXPECT_TRUE(got.second == want.second) << "new residual differs from the baseline's";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, AddRmsNormVariants,
                         ::testing::Values(KernelIsa::kAvx512Bf16, KernelIsa::kAvx512,
                                           KernelIsa::kAvx2),
                         [](const auto& param) {
                           return std::string(kernels::cpu::to_string(param.param));
                         });

}  // namespace
}  // namespace tpcomm
