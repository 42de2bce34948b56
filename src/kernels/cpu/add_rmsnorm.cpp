// add_rmsnorm_rows_with, compiled for AVX-512, AVX2 and the baseline as reduce.cpp is; float16
// one element at a time (its conversions are not in the vector helpers).
#include "add_rmsnorm.hpp"

#include <cmath>
#include <cstring>

#include "convert.hpp"
#include "reduce_kernels.hpp"
#include "reduce_vectors.hpp"

namespace tpcomm::kernels::cpu {
namespace {

using namespace variants;  // NOLINT(google-build-using-namespace): the kernels' own helpers

// Partial sums of squares, the same for every width: element i goes into partial i % 64, so that
// AVX-512 keeps four independent accumulators (AVX2 eight, the baseline sixteen) and no add waits
// for the one before it.
constexpr std::size_t kPartials = 64;

// One row's places.
struct Row {
  const void* const* srcs;
  int ranks;
  const char* residual;  // or null
  const char* weight;
  char* keep;  // the rounded sum: residual_out, or out itself
  char* out;
};

float load_one(DataType type, const void* row, std::size_t i) {
  const auto* p = static_cast<const char*>(row);
  if (type == DataType::kFloat32) {
    float v;
    std::memcpy(&v, p + i * 4, 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, p + i * 2, 2);
  return type == DataType::kBFloat16 ? bf16_to_float(h) : fp16_to_float(h);
}

// Stores v rounded to `type` and returns the rounded value.
float store_one(DataType type, char* row, std::size_t i, float v) {
  if (type == DataType::kFloat32) {
    std::memcpy(row + i * 4, &v, 4);
    return v;
  }
  const std::uint16_t h = type == DataType::kBFloat16 ? float_to_bf16(v) : float_to_fp16(v);
  std::memcpy(row + i * 2, &h, 2);
  return load_one(type, row, i);
}

// Elements [from, to) of the first pass one at a time: sum, residual, round, keep, square.
void first_pass_tail(const Row& r, DataType source_type, DataType type, std::size_t from,
                     std::size_t to, float* partial) {
  for (std::size_t i = from; i < to; ++i) {
    float acc = load_one(source_type, r.srcs[0], i);
    for (int q = 1; q < r.ranks; ++q) acc += load_one(source_type, r.srcs[q], i);
    if (r.residual != nullptr) acc += load_one(type, r.residual, i);
    const float v = store_one(type, r.keep, i, acc);
    partial[i % kPartials] += v * v;
  }
}

// The scale of a row from its partial sums of squares, added in one fixed order.
float inverse_rms(float* partial, std::size_t hidden, float eps) {
  for (std::size_t half = kPartials / 2; half > 0; half /= 2) {
    for (std::size_t j = 0; j < half; ++j) partial[j] += partial[j + half];
  }
  return 1.0f / std::sqrt(partial[0] / static_cast<float>(hidden) + eps);
}

void second_pass_tail(const Row& r, DataType type, std::size_t from, std::size_t to, float inv) {
  for (std::size_t i = from; i < to; ++i) {
    store_one(type, r.out, i, load_one(type, r.keep, i) * inv * load_one(type, r.weight, i));
  }
}

// The sum of the sources' vector at byte offset `at` (narrow: 16-bit elements), in rank order;
// Ranks > 0: that many sources, unrolled; 0: `ranks` of them.
template <int B, bool Narrow, int Ranks>
TPCOMM_INLINE VecF<B> sum_sources(const char* const* srcs, int ranks, std::size_t at) {
  VecF<B> acc = load_elements<Narrow, B>(srcs[0] + at);
  if constexpr (Ranks > 0) {
    for (int q = 1; q < Ranks; ++q) acc += load_elements<Narrow, B>(srcs[q] + at);
  } else {
    for (int q = 1; q < ranks; ++q) acc += load_elements<Narrow, B>(srcs[q] + at);
  }
  return acc;
}

// One row in vectors of B bytes; Bf16: the call's type is bfloat16 (else float32); SourceF32:
// the sources are float32 whatever the type; Ranks: the sources' count, 0 for any.
template <int B, bool Bf16, bool SourceF32, int Ranks>
TPCOMM_INLINE void vector_row(const Row& r, std::size_t hidden, float eps) {
  constexpr std::size_t lanes = B / sizeof(float);
  constexpr std::size_t vectors = kPartials / lanes;
  constexpr std::size_t es = Bf16 ? 2 : 4;
  constexpr std::size_t source_es = SourceF32 ? 4 : es;
  constexpr bool kNarrowSources = Bf16 && !SourceF32;
  constexpr DataType type = Bf16 ? DataType::kBFloat16 : DataType::kFloat32;
  // Locals, not r's members: a store through `keep` (a char pointer) could alias r itself, and
  // the members would be loaded again after every store.
  const auto* const* srcs = reinterpret_cast<const char* const*>(r.srcs);
  const int ranks = r.ranks;
  const char* const residual = r.residual;
  const char* const weight = r.weight;
  char* const keep = r.keep;
  char* const out = r.out;
  VecF<B> squares[vectors] = {};
  std::size_t i = 0;
  for (; i + kPartials <= hidden; i += kPartials) {
    for (std::size_t k = 0; k < vectors; ++k) {
      const std::size_t at = i + k * lanes;
      VecF<B> acc = sum_sources<B, kNarrowSources, Ranks>(srcs, ranks, at * source_es);
      if (residual != nullptr) acc += load_elements<Bf16, B>(residual + at * es);
      if constexpr (Bf16) {
        store_bf16<B>(keep + at * es, acc);
        acc = load_bf16<B>(keep + at * es);
      } else {
        std::memcpy(keep + at * es, &acc, sizeof(acc));
      }
      squares[k] += acc * acc;
    }
  }
  float partial[kPartials];
  std::memcpy(partial, squares, sizeof(partial));
  first_pass_tail(r, SourceF32 ? DataType::kFloat32 : type, type, i, hidden, partial);
  const float inv = inverse_rms(partial, hidden, eps);
  std::size_t j = 0;
  for (; j + lanes <= hidden; j += lanes) {
    const VecF<B> y =
        load_elements<Bf16, B>(keep + j * es) * inv * load_elements<Bf16, B>(weight + j * es);
    if constexpr (Bf16) {
      store_bf16<B>(out + j * es, y);
    } else {
      std::memcpy(out + j * es, &y, sizeof(y));
    }
  }
  second_pass_tail(r, type, j, hidden, inv);
}

// bfloat16 pairs: a register of B bytes holds B / 2 elements, widened in place (the even ones
// from the low halves, the odd ones from the high halves) as the reduction kernels do, so no
// lane crosses another and the rounding packs the two halves back with a shift and an or.
template <int B>
TPCOMM_INLINE void widen_pairs(const char* p, VecF<B>& even, VecF<B>& odd) {
  const VecU32<B> u = load_u32<B>(p);
  even = bits_to_f32<B>(u << 16);
  odd = bits_to_f32<B>(u & 0xffff0000u);
}

// The rounded pair stored at `p`, and each half as the float it now is.
template <int B>
TPCOMM_INLINE void store_pairs(char* p, VecF<B>& even, VecF<B>& odd) {
  const VecU32<B> e = round_to_bf16<B>(even);
  const VecU32<B> o = round_to_bf16<B>(odd);
  const VecU32<B> packed = e | (o << 16);
  std::memcpy(p, &packed, sizeof(packed));
  even = bits_to_f32<B>(e << 16);
  odd = bits_to_f32<B>(o << 16);
}

// A bfloat16 row of bfloat16 sources, by pairs: element i's square still goes into partial
// i % kPartials (the even lanes of chunk k hold partials k * B / 2 + 2l, the odd ones the next),
// so the bits are those of every other form. Ranks as vector_row's.
template <int B, int Ranks>
TPCOMM_INLINE void pair_row(const Row& r, std::size_t hidden, float eps) {
  constexpr std::size_t per = B / 2;  // elements per register
  constexpr std::size_t lanes = B / sizeof(float);
  constexpr std::size_t chunks = kPartials / per;
  const auto* const* srcs = reinterpret_cast<const char* const*>(r.srcs);
  const int ranks = Ranks > 0 ? Ranks : r.ranks;
  const char* const residual = r.residual;
  const char* const weight = r.weight;
  char* const keep = r.keep;
  char* const out = r.out;
  VecF<B> even_squares[chunks] = {};
  VecF<B> odd_squares[chunks] = {};
  std::size_t i = 0;
  for (; i + kPartials <= hidden; i += kPartials) {
    for (std::size_t k = 0; k < chunks; ++k) {
      const std::size_t at = (i + k * per) * 2;
      VecF<B> even, odd, e, o;
      widen_pairs<B>(srcs[0] + at, even, odd);
      for (int q = 1; q < ranks; ++q) {
        widen_pairs<B>(srcs[q] + at, e, o);
        even += e;
        odd += o;
      }
      if (residual != nullptr) {
        widen_pairs<B>(residual + at, e, o);
        even += e;
        odd += o;
      }
      store_pairs<B>(keep + at, even, odd);
      even_squares[k] += even * even;
      odd_squares[k] += odd * odd;
    }
  }
  float partial[kPartials];
  for (std::size_t k = 0; k < chunks; ++k) {
    float e[lanes], o[lanes];
    std::memcpy(e, &even_squares[k], sizeof(e));
    std::memcpy(o, &odd_squares[k], sizeof(o));
    for (std::size_t l = 0; l < lanes; ++l) {
      partial[k * per + 2 * l] = e[l];
      partial[k * per + 2 * l + 1] = o[l];
    }
  }
  first_pass_tail(r, DataType::kBFloat16, DataType::kBFloat16, i, hidden, partial);
  const float inv = inverse_rms(partial, hidden, eps);
  std::size_t j = 0;
  for (; j + per <= hidden; j += per) {
    VecF<B> even, odd, we, wo;
    widen_pairs<B>(keep + j * 2, even, odd);
    widen_pairs<B>(weight + j * 2, we, wo);
    even = even * inv * we;
    odd = odd * inv * wo;
    store_pairs<B>(out + j * 2, even, odd);
  }
  second_pass_tail(r, DataType::kBFloat16, j, hidden, inv);
}

// bfloat16 of bfloat16 sources by pairs, the rest by vectors.
template <int B, bool Bf16, bool SourceF32, int Ranks>
TPCOMM_INLINE void row_of(const Row& r, std::size_t hidden, float eps) {
  if constexpr (Bf16 && !SourceF32) {
    pair_row<B, Ranks>(r, hidden, eps);
  } else {
    vector_row<B, Bf16, SourceF32, Ranks>(r, hidden, eps);
  }
}

using RowFn = void (*)(const Row&, std::size_t, float);

// [type form][ranks form]: type forms float32, bfloat16, bfloat16 of float32 sources; ranks forms
// one source, two, any.
#define TPCOMM_ADD_RMSNORM_FORMS(SUFFIX, TARGET, BYTES, BF16, SRC32) \
  TARGET void SUFFIX##_1(const Row& r, std::size_t h, float e) {     \
    row_of<BYTES, BF16, SRC32, 1>(r, h, e);                          \
  }                                                                  \
  TARGET void SUFFIX##_2(const Row& r, std::size_t h, float e) {     \
    row_of<BYTES, BF16, SRC32, 2>(r, h, e);                          \
  }                                                                  \
  TARGET void SUFFIX##_n(const Row& r, std::size_t h, float e) {     \
    row_of<BYTES, BF16, SRC32, 0>(r, h, e);                          \
  }
#define TPCOMM_ADD_RMSNORM_VARIANT(SUFFIX, TARGET, BYTES)                   \
  TPCOMM_ADD_RMSNORM_FORMS(f32_##SUFFIX, TARGET, BYTES, false, false)       \
  TPCOMM_ADD_RMSNORM_FORMS(bf16_##SUFFIX, TARGET, BYTES, true, false)       \
  TPCOMM_ADD_RMSNORM_FORMS(bf16_of_f32_##SUFFIX, TARGET, BYTES, true, true) \
  constexpr RowFn kRows_##SUFFIX[3][3] = {                                  \
      {f32_##SUFFIX##_1, f32_##SUFFIX##_2, f32_##SUFFIX##_n},               \
      {bf16_##SUFFIX##_1, bf16_##SUFFIX##_2, bf16_##SUFFIX##_n},            \
      {bf16_of_f32_##SUFFIX##_1, bf16_of_f32_##SUFFIX##_2, bf16_of_f32_##SUFFIX##_n}};

TPCOMM_ADD_RMSNORM_VARIANT(avx512, TPCOMM_TARGET_AVX512, 64)
TPCOMM_ADD_RMSNORM_VARIANT(avx2, TPCOMM_TARGET_AVX2, 32)
TPCOMM_ADD_RMSNORM_VARIANT(baseline, , 16)

// float16, or any type one element at a time.
void scalar_row(const Row& r, DataType source_type, DataType type, std::size_t hidden, float eps) {
  float partial[kPartials] = {};
  first_pass_tail(r, source_type, type, 0, hidden, partial);
  second_pass_tail(r, type, 0, hidden, inverse_rms(partial, hidden, eps));
}

}  // namespace

void add_rmsnorm_rows_with(KernelIsa isa, const void* const* srcs, int ranks, DataType source_type,
                           std::size_t rows, DataType type, const RmsNorm& norm, void* out) {
  const std::size_t es = size_of(type);
  const std::size_t source_es = size_of(source_type);
  const std::size_t h = norm.hidden;
  const auto& fns = isa == KernelIsa::kAvx512 || isa == KernelIsa::kAvx512Bf16 ? kRows_avx512
                    : isa == KernelIsa::kAvx2                                  ? kRows_avx2
                                                                               : kRows_baseline;
  const int by_ranks = ranks == 1 ? 0 : ranks == 2 ? 1 : 2;
  const RowFn fn = type == DataType::kFloat32    ? fns[0][by_ranks]
                   : type != DataType::kBFloat16 ? nullptr
                   : source_type == type         ? fns[1][by_ranks]
                                                 : fns[2][by_ranks];
  const void* row_srcs[64];
  for (std::size_t row = 0; row < rows; ++row) {
    for (int q = 0; q < ranks; ++q) {
      row_srcs[q] = static_cast<const char*>(srcs[q]) + row * h * source_es;
    }
    char* out_row = static_cast<char*>(out) + row * h * es;
    const Row r{row_srcs,
                ranks,
                norm.residual ? static_cast<const char*>(norm.residual) + row * h * es : nullptr,
                static_cast<const char*>(norm.weight),
                norm.residual_out ? static_cast<char*>(norm.residual_out) + row * h * es : out_row,
                out_row};
    if (fn != nullptr) {
      fn(r, h, norm.eps);
    } else {
      scalar_row(r, source_type, type, h, norm.eps);
    }
  }
}

}  // namespace tpcomm::kernels::cpu
