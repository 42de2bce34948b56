// tpcomm bench's all_reduce_rmsnorm (bench_norm.hpp).
#include "bench_norm.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "bench_data.hpp"
#include "bench_timing.hpp"
#include "kernels/cpu/add_rmsnorm.hpp"
#include "tpcomm/convert.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm::cli {
namespace {

constexpr float kEps = 1e-6f;

// The buffers of one size: every rank's input is bench_input's small integers, the residual
// those of a third rank (2), the weight 1 + (j % 5) / 8: exact in every type and every sum.
struct NormBuffers {
  std::size_t rows, hidden, n;
  DataType type;
  BenchBytes in, out, residual, residual_out, weight, sums;
  RmsNorm norm;

  NormBuffers(const BenchArgs& a, std::uint64_t bytes, int rank)
      : rows(std::max<std::uint64_t>(1, bytes / (a.hidden * size_of(a.dtype)))),
        hidden(a.hidden),
        n(rows * a.hidden),
        type(a.dtype),
        in(bench_input(n, a.dtype, rank)),
        out(n * size_of(a.dtype)),
        residual(bench_input(n, a.dtype, 2)),
        residual_out(n * size_of(a.dtype)),
        sums(n * size_of(a.dtype)) {
    std::vector<float> w(hidden);
    for (std::size_t j = 0; j < hidden; ++j) w[j] = 1.0f + static_cast<float>(j % 5) / 8;
    weight.resize(hidden * size_of(type));
    from_float(w.data(), type, hidden, weight.data());
    norm.weight = weight.data();
    norm.hidden = hidden;
    norm.eps = kEps;
  }

  void fused(Communicator& comm) {
    norm.residual = residual.data();
    norm.residual_out = residual_out.data();
    comm.all_reduce_rmsnorm(in.data(), out.data(), n, type, norm);
  }
  // vLLM's in-place form on copies, so that the out-of-place inputs stay as they were.
  void fused_in_place(Communicator& comm, BenchBytes& x, BenchBytes& r) {
    norm.residual = r.data();
    norm.residual_out = r.data();
    comm.all_reduce_rmsnorm(x.data(), x.data(), n, type, norm);
  }
  // Without the fusion: the all-reduce in the call's type (rounded once there), then add+norm.
  void unfused(Communicator& comm) {
    comm.all_reduce(in.data(), sums.data(), n, type, ReduceOp::kSum);
    norm.residual = residual.data();
    norm.residual_out = residual_out.data();
    const void* srcs[1] = {sums.data()};
    kernels::cpu::add_rmsnorm_rows_with(transport::cpu::chosen_kernel_isa(), srcs, 1, type, rows,
                                        type, norm, out.data());
  }

  // Elements of `o` and `ro` (an output and its residual_out) off the float64 reference of the
  // exact inputs.
  std::uint64_t wrong(const BenchBytes& o, const BenchBytes& ro, int w) const {
    std::vector<float> got(n), got_res(n), x(n), res(n), wt(hidden);
    to_float(o.data(), type, n, got.data());
    to_float(ro.data(), type, n, got_res.data());
    to_float(residual.data(), type, n, res.data());
    to_float(weight.data(), type, hidden, wt.data());
    std::vector<double> sum(res.begin(), res.end());
    for (int r = 0; r < w; ++r) {
      const BenchBytes mine = bench_input(n, type, r);
      to_float(mine.data(), type, n, x.data());
      for (std::size_t i = 0; i < n; ++i) sum[i] += x[i];
    }
    // 2e-5 for float32, 2 units in the last place for 16-bit types.
    const double tol = type == DataType::kFloat32   ? 2e-5
                       : type == DataType::kFloat16 ? 0x1p-9
                                                    : 0x1p-6;
    std::uint64_t bad = 0;
    for (std::size_t row = 0; row < rows; ++row) {
      const double* s = sum.data() + row * hidden;
      double squares = 0;
      for (std::size_t j = 0; j < hidden; ++j) squares += s[j] * s[j];
      const double inv = 1.0 / std::sqrt(squares / static_cast<double>(hidden) + kEps);
      for (std::size_t j = 0; j < hidden; ++j) {
        const std::size_t i = row * hidden + j;
        const double want = s[j] * inv * wt[j];
        if (got_res[i] != s[j]) ++bad;  // small integers: exact
        if (std::fabs(got[i] - want) > tol * std::max(1.0, std::fabs(want))) ++bad;
      }
    }
    return bad;
  }
};

}  // namespace

BenchRow measure_norm(const BenchArgs& a, Communicator& comm, Bootstrap& bs, std::uint64_t bytes) {
  NormBuffers b(a, bytes, bs.rank());
  BenchRow row;
  row.bytes = b.n * size_of(a.dtype);
  row.count = b.n;
  const int warmup = bytes == a.min_bytes ? std::max(a.warmup, kFirstRowWarmup) : a.warmup;
  const Timing oop = time_calls(bs, warmup, a.iters, [&] { b.fused(comm); });
  row.time_oop = oop.best;
  row.spread_oop = oop.spread();
  BenchBytes x = b.in;
  BenchBytes r = b.residual;
  row.time_ip = time_calls(bs, a.warmup, a.iters, [&] { b.fused_in_place(comm, x, r); }).best;
  if (a.check) {
    std::fill(b.out.begin(), b.out.end(), 0);
    b.fused(comm);
    row.wrong_oop = sum_over_ranks(bs, b.wrong(b.out, b.residual_out, bs.size()));
    x = b.in;
    r = b.residual;
    b.fused_in_place(comm, x, r);
    row.wrong_ip = sum_over_ranks(bs, b.wrong(x, r, bs.size()));
  }
  const auto& plan_row = comm.plan().ops.at(Op::kAllReduceRmsNorm).row_for(row.bytes);
  row.path = fmt::format("{}/{}", to_string(plan_row.backend), to_string(plan_row.algorithm));
  if (a.compare.find("unfused") != std::string::npos) {
    row.unfused = time_calls(bs, warmup, a.iters, [&] { b.unfused(comm); });
    if (a.check) {
      std::fill(b.out.begin(), b.out.end(), 0);
      b.unfused(comm);
      row.wrong_oop += sum_over_ranks(bs, b.wrong(b.out, b.residual_out, bs.size()));
    }
  }
  return row;
}

}  // namespace tpcomm::cli
