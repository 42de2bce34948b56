// The shm backend's calls with per-rank counts: all_gatherv and reduce_scatterv, over the step
// protocol of shm_backend.cpp. Every rank knows every count (they are the same on all ranks and
// their digest was compared with the call), so every rank takes the same steps.
#include <algorithm>

#include "kernels/cpu/reduce.hpp"
#include "shm_backend_impl.hpp"
#include "transport/cpu/team_ops.hpp"

namespace tpcomm::transport::shm {
std::size_t ShmBackend::block_starts(const std::size_t* counts,
                                     std::vector<std::size_t>& at) const {
  const auto w = static_cast<std::size_t>(ctx_.size);
  at.assign(w + 1, 0);
  std::size_t largest = 0;
  for (std::size_t r = 0; r < w; ++r) {
    at[r + 1] = at[r] + counts[r];
    largest = std::max(largest, counts[r]);
  }
  return largest;
}

void ShmBackend::all_gatherv(const Call& c) {
  const std::size_t es = size_of(c.type);
  const auto w = static_cast<std::size_t>(ctx_.size);
  const auto me = static_cast<std::size_t>(ctx_.rank);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  auto* out = static_cast<std::uint8_t*>(c.output);
  const Describe what = describer(c, Algorithm::kOneShot);
  const std::size_t largest = block_starts(c.recv_counts, recv_at_);
  cpu::team_copy(call_team_, out + recv_at_[me] * es, in, c.recv_counts[me] * es);
  // A lane holds the next part of this rank's block; a call of no elements still takes a step.
  const std::size_t per = std::max<std::size_t>(1, step_bytes(c) / es);
  for (std::size_t base = 0; base < largest || (largest == 0 && base == 0); base += per) {
    const std::uint64_t seq = ++seq_;
    const std::size_t n = block_part(c.recv_counts[me], base, per);
    if (n > 0) cpu::team_copy(call_team_, lane(ctx_.rank, seq), in + base * es, n * es);
    exchange(seq, c, Algorithm::kOneShot, what);
    for (std::size_t r = 0; r < w; ++r) {
      const std::size_t m = block_part(c.recv_counts[r], base, per);
      if (r == me || m == 0) continue;
      cpu::team_copy(call_team_, out + (recv_at_[r] + base) * es, lane(static_cast<int>(r), seq),
                     m * es);
    }
    flush_wake(header(), wake_pending_);
    if (largest == 0) break;
  }
}

void ShmBackend::reduce_scatterv(const Call& c) {
  const std::size_t es = size_of(c.type);
  const auto w = static_cast<std::size_t>(ctx_.size);
  const auto me = static_cast<std::size_t>(ctx_.rank);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  auto* out = static_cast<std::uint8_t*>(c.output);
  const Describe what = describer(c, Algorithm::kOneShot);
  const std::size_t largest = block_starts(c.recv_counts, recv_at_);
  // A lane holds the next part of every block but this rank's own, block b at b * per.
  const std::size_t per = std::max<std::size_t>(1, step_bytes(c) / (es * w));
  for (std::size_t base = 0; base < largest || (largest == 0 && base == 0); base += per) {
    const std::uint64_t seq = ++seq_;
    for (std::size_t b = 0; b < w; ++b) {
      const std::size_t n = block_part(c.recv_counts[b], base, per);
      if (b == me || n == 0) continue;
      cpu::team_copy(call_team_, lane(ctx_.rank, seq) + b * per * es,
                     in + (recv_at_[b] + base) * es, n * es);
    }
    exchange(seq, c, Algorithm::kOneShot, what);
    const std::size_t n = block_part(c.recv_counts[me], base, per);
    if (n > 0) {
      for (std::size_t r = 0; r < w; ++r) {
        sources_[r] = r == me ? in + (recv_at_[me] + base) * es
                              : lane(static_cast<int>(r), seq) + me * per * es;
      }
      cpu::team_reduce(call_team_, sources_.data(), ctx_.size, n, c.type, c.reduce,
                       out + base * es);
    }
    flush_wake(header(), wake_pending_);
    if (largest == 0) break;
  }
}

}  // namespace tpcomm::transport::shm
