// all_reduce_rmsnorm through the lanes (shm_backend_impl.hpp): one-shot whose consume is the
// add+norm epilogue instead of a plain sum, and two-shot by rows.
#include <algorithm>

#include <fmt/format.h>

#include "shm_backend_impl.hpp"
#include "tpcomm/error.hpp"
#include "transport/cpu/team_ops.hpp"

namespace tpcomm::transport::shm {

void ShmBackend::one_shot_rmsnorm(const Call& c) {
  const RmsNorm& norm = *c.norm;
  const std::size_t es = size_of(c.type);
  const std::size_t row_bytes = norm.hidden * es;
  // A step holds whole rows: the norm of a row needs all of its sum. Every rank computes the
  // same step from the same call (its rows are compared in the lane headers).
  if (row_bytes > lane_bytes_) {
    throw invalid_input(fmt::format(
        "shm: a row of {} bytes does not fit a lane of {} (TPCOMM_SHM_WORKSPACE sets its "
        "size)",
        row_bytes, lane_bytes_));
  }
  const std::size_t rows_per_step = std::max<std::size_t>(1, step_bytes(c) / row_bytes);
  const std::size_t step = rows_per_step * norm.hidden;
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  auto* out = static_cast<std::uint8_t*>(c.output);
  const std::size_t at = c.count <= step ? step_offset(seq_ + 1, c.count * es) : 0;
  chunked(
      c, step, Algorithm::kOneShot, describer(c, Algorithm::kOneShot),
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        fill_lane(c, lane(ctx_.rank, seq) + at, in + base * es, n * es);
      },
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        RmsNorm rows = norm;
        if (norm.residual)
          rows.residual = static_cast<const std::uint8_t*>(norm.residual) + base * es;
        if (norm.residual_out) {
          rows.residual_out = static_cast<std::uint8_t*>(norm.residual_out) + base * es;
        }
        cpu::team_add_rmsnorm(call_team_, sources(seq, at, in + base * es, base * es), ctx_.size,
                              n / norm.hidden, c.type, rows, out + base * es);
        if (c.count <= step) take_next_place(seq, n * es);
      });
}

void ShmBackend::two_shot_rmsnorm(const Call& c) {
  const RmsNorm& norm = *c.norm;
  const std::size_t es = size_of(c.type);
  const std::size_t row_bytes = norm.hidden * es;
  const auto w = static_cast<std::size_t>(ctx_.size);
  // A step's rows fill the first half of a lane; this rank's new residual rows go into the second
  // half, beside its normalised ones, for the peers to copy out. A call of fewer rows than ranks
  // (some rank would own none) or whose row does not fit half a lane runs one-shot: every rank
  // decides alike from the call they compare.
  const std::size_t room = lane_bytes_ / 2 / row_bytes;
  if (room == 0 || c.count / norm.hidden < w) return one_shot_rmsnorm(c);
  const std::size_t rows_per_step = std::clamp<std::size_t>(step_bytes(c) / row_bytes, 1, room);
  const std::size_t half = rows_per_step * row_bytes;
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  auto* out = static_cast<std::uint8_t*>(c.output);
  auto* residual_out = static_cast<std::uint8_t*>(norm.residual_out);
  // Rank r's rows of a step of `rows`: [first, first + count).
  auto slice = [w](std::size_t rows, std::size_t r) {
    const std::size_t lo = rows * r / w;
    return std::make_pair(lo, rows * (r + 1) / w - lo);
  };
  const auto me = static_cast<std::size_t>(ctx_.rank);
  const Describe what = describer(c, Algorithm::kTwoShot);
  // The lane gets every rank's rows but this rank's own, which it reads from `in`.
  auto fill = [&](std::size_t base, std::size_t n, std::uint64_t seq) {
    const std::size_t rows = n / norm.hidden;
    const auto [lo, len] = slice(rows, me);
    const std::uint8_t* from = in + base * es;
    fill_lane(c, lane(ctx_.rank, seq), from, lo * row_bytes);
    fill_lane(c, lane(ctx_.rank, seq) + (lo + len) * row_bytes, from + (lo + len) * row_bytes,
              (rows - lo - len) * row_bytes);
  };
  auto consume = [&](std::size_t base, std::size_t n, std::uint64_t seq) {
    const std::size_t rows = n / norm.hidden;
    const auto [lo, len] = slice(rows, me);
    const std::size_t at = base * es + lo * row_bytes;  // this rank's rows in the call's buffers
    std::uint8_t* mine = lane(ctx_.rank, seq);
    RmsNorm part = norm;
    if (norm.residual) part.residual = static_cast<const std::uint8_t*>(norm.residual) + at;
    if (norm.residual_out) part.residual_out = mine + half + lo * row_bytes;
    cpu::team_add_rmsnorm(call_team_, sources(seq, lo * row_bytes, in + at, at), ctx_.size, len,
                          c.type, part, mine + lo * row_bytes);
    publish(Flag::kReduced, seq);
    wait(Flag::kReduced, seq, what);
    for (std::size_t r = 0; r < w; ++r) {
      const auto [rlo, rlen] = slice(rows, r);
      const std::uint8_t* theirs = lane(static_cast<int>(r), seq);
      const std::size_t to = base * es + rlo * row_bytes;
      cpu::team_copy(call_team_, out + to, theirs + rlo * row_bytes, rlen * row_bytes);
      if (residual_out != nullptr) {
        cpu::team_copy(call_team_, residual_out + to, theirs + half + rlo * row_bytes,
                       rlen * row_bytes);
      }
    }
  };
  chunked(c, rows_per_step * norm.hidden, Algorithm::kTwoShot, what, fill, consume);
}

}  // namespace tpcomm::transport::shm
