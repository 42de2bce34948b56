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

constexpr std::size_t kPartials = 16;  // partial sums of squares, the same for every width

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

// One row in vectors of B bytes; Bf16: the call's type is bfloat16 (else float32); SourceF32:
// the sources are float32 whatever the type.
template <int B, bool Bf16, bool SourceF32>
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
      VecF<B> acc = load_elements<kNarrowSources, B>(srcs[0] + at * source_es);
      for (int q = 1; q < ranks; ++q) {
        acc += load_elements<kNarrowSources, B>(srcs[q] + at * source_es);
      }
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

using RowFn = void (*)(const Row&, std::size_t, float);

#define TPCOMM_ADD_RMSNORM_VARIANT(SUFFIX, TARGET, BYTES)                      \
  TARGET void row_f32_##SUFFIX(const Row& r, std::size_t h, float e) {         \
    vector_row<BYTES, false, false>(r, h, e);                                  \
  }                                                                            \
  TARGET void row_bf16_##SUFFIX(const Row& r, std::size_t h, float e) {        \
    vector_row<BYTES, true, false>(r, h, e);                                   \
  }                                                                            \
  TARGET void row_bf16_of_f32_##SUFFIX(const Row& r, std::size_t h, float e) { \
    vector_row<BYTES, true, true>(r, h, e);                                    \
  }                                                                            \
  constexpr RowFn kRows_##SUFFIX[3] = {row_f32_##SUFFIX, row_bf16_##SUFFIX,    \
                                       row_bf16_of_f32_##SUFFIX};

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
  const RowFn* fns = isa == KernelIsa::kAvx512 || isa == KernelIsa::kAvx512Bf16 ? kRows_avx512
                     : isa == KernelIsa::kAvx2                                  ? kRows_avx2
                                                                                : kRows_baseline;
  const RowFn fn = type == DataType::kFloat32    ? fns[0]
                   : type != DataType::kBFloat16 ? nullptr
                   : source_type == type         ? fns[1]
                                                 : fns[2];
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
