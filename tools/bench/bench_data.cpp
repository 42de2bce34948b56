// Inputs and the result check of tpcomm bench (bench_data.hpp).
#include "bench_data.hpp"

#include <algorithm>
#include <cmath>

#include "tpcomm/convert.hpp"

namespace tpcomm::cli {
namespace {

// Small integers: exact in every type and in every sum, so the check is exact.
float value_of(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * ((i % 7) + 1) % 16);
}

// The exact result at output index `i` of rank `rank`.
double expected(Op op, ReduceOp redop, std::size_t i, std::size_t n_out, int rank, int w,
                std::size_t n_in_per_rank) {
  if (op == Op::kAllGather || op == Op::kGather) {
    return value_of(static_cast<int>(i / n_in_per_rank), i % n_in_per_rank);
  }
  // Scatter: root 0's block for this rank.
  if (op == Op::kScatter) return value_of(0, static_cast<std::size_t>(rank) * n_out + i);
  const std::size_t idx = op == Op::kReduceScatter ? static_cast<std::size_t>(rank) * n_out + i : i;
  double expect = value_of(0, idx);
  for (int r = 1; r < w; ++r) {
    const double v = value_of(r, idx);
    expect = redop == ReduceOp::kMax   ? std::max(expect, v)
             : redop == ReduceOp::kMin ? std::min(expect, v)
                                       : expect + v;
  }
  return redop == ReduceOp::kAvg ? expect / w : expect;
}

}  // namespace

double bus_factor(Op op, int w) {
  if (op == Op::kSendRecv || op == Op::kReduce) return 1.0;
  return op == Op::kAllReduce ? 2.0 * (w - 1) / w : static_cast<double>(w - 1) / w;
}

std::pair<std::size_t, std::size_t> bench_counts(Op op, std::uint64_t bytes, std::size_t es,
                                                 int w) {
  const std::size_t total = bytes / es;
  if (op == Op::kAllReduce || op == Op::kReduce) return {total, total};
  const std::size_t per = total / static_cast<std::size_t>(w);
  const bool gathers = op == Op::kAllGather || op == Op::kGather;
  return gathers ? std::make_pair(per, per * static_cast<std::size_t>(w))
                 : std::make_pair(per * static_cast<std::size_t>(w), per);
}

BenchBytes bench_input(std::size_t n, DataType type, int rank) {
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = value_of(rank, i);
  BenchBytes buf(n * size_of(type));
  from_float(values.data(), type, n, buf.data());
  return buf;
}

std::uint64_t count_wrong(Op op, ReduceOp redop, DataType type, const std::uint8_t* out,
                          std::size_t n_out, int rank, int w, std::size_t n_in_per_rank) {
  std::vector<float> got(n_out);
  to_float(out, type, n_out, got.data());
  const double tol = type == DataType::kFloat32 ? 1e-5 : type == DataType::kFloat16 ? 1e-3 : 8e-3;
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < n_out; ++i) {
    const double expect = expected(op, redop, i, n_out, rank, w, n_in_per_rank);
    if (std::fabs(got[i] - expect) > tol * std::max(1.0, std::fabs(expect))) ++wrong;
  }
  return wrong;
}

}  // namespace tpcomm::cli
