// The shm backend's exchanges and rooted calls, each a fill and a consume over the step protocol
// (ShmBackend::chunked, shm_backend.cpp) like the reductions of shm_collectives.cpp: all_to_all,
// all_to_allv, gather, scatter and reduce, through the lanes.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kernels/cpu/streaming_copy.hpp"
#include "shm_backend_impl.hpp"
#include "tpcomm/error.hpp"
#include "transport/cpu/team_ops.hpp"

namespace tpcomm::transport::shm {

// all_to_allv reads its peers' blocks in place when its largest block is at least this: below it
// the system call and the closing barrier cost more than the second copy (the equal all_to_all's
// plan row says; tpcomm bench --op all_to_all --uneven, docs/results).
constexpr std::size_t kDirectBlockBytes = 32 << 10;

void ShmBackend::read_blocks(const Call& c, std::uint64_t seq, const std::size_t* counts,
                             const std::vector<std::size_t>& from_at,
                             const std::vector<std::size_t>& to_at, const Describe& what) {
  const std::size_t es = size_of(c.type);
  auto* out = static_cast<std::uint8_t*>(c.output);
  // Each rank starts with the next rank's block, so that the ranks do not all read rank 0 first.
  for (int k = 1; k < ctx_.size; ++k) {
    const int r = (ctx_.rank + k) % ctx_.size;
    const auto ur = static_cast<std::size_t>(r);
    if (counts[ur] == 0) continue;
    cpu::team_read_peer(call_team_, r, peer_pid_[ur], peer_address_[ur] + from_at[ur] * es,
                        out + to_at[ur] * es, counts[ur] * es);
  }
  publish(Flag::kReduced, seq);
  wait(Flag::kReduced, seq, what);
  flush_wake(header(), wake_pending_);
}

void ShmBackend::all_to_all(const Call& c) {
  const std::size_t es = size_of(c.type);
  const auto w = static_cast<std::size_t>(ctx_.size);
  const auto me = static_cast<std::size_t>(ctx_.rank);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  auto* out = static_cast<std::uint8_t*>(c.output);
  if (single_copy_ && c.algorithm == Algorithm::kSingleCopy) {
    const Describe what = describer(c, Algorithm::kSingleCopy);
    mine_single_copy_ = reinterpret_cast<std::uint64_t>(in) | kSingleCopyFlag;
    const std::uint64_t seq = ++seq_;
    exchange(seq, c, Algorithm::kSingleCopy, what);
    cpu::team_copy(call_team_, out + me * c.count * es, in + me * c.count * es, c.count * es,
                   c.count * es >= kernels::cpu::kStreamingCopyMinBytes);
    peer_at_.assign(w, me * c.count);
    recv_at_.resize(w);
    send_at_.assign(w, c.count);
    for (std::size_t r = 0; r < w; ++r) recv_at_[r] = r * c.count;
    return read_blocks(c, seq, send_at_.data(), peer_at_, recv_at_, what);
  }
  chunked(
      c, std::max<std::size_t>(1, step_bytes(c) / (es * w)), Algorithm::kOneShot,
      describer(c, Algorithm::kOneShot),
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        for (std::size_t b = 0; b < w; ++b) {  // not its own block: that goes straight out
          if (b == me) continue;
          cpu::team_copy(call_team_, lane(ctx_.rank, seq) + b * n * es,
                         in + (b * c.count + base) * es, n * es);
        }
      },
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        for (std::size_t r = 0; r < w; ++r) {
          const std::uint8_t* from = r == me ? in + (me * c.count + base) * es
                                             : lane(static_cast<int>(r), seq) + me * n * es;
          cpu::team_copy(call_team_, out + (r * c.count + base) * es, from, n * es);
        }
      });
}

std::size_t ShmBackend::agree_on_counts(const Call& c, std::uint64_t seq, const Describe& what) {
  const auto w = static_cast<std::size_t>(ctx_.size);
  if (2 * w * sizeof(std::uint64_t) > lane_bytes_) {
    throw invalid_input(
        fmt::format("shm: all_to_allv of {} ranks needs lanes of {} bytes, more "
                    "than TPCOMM_SHM_WORKSPACE gives ({})",
                    w, 2 * w * sizeof(std::uint64_t), lane_bytes_));
  }
  // The lane: this rank's send counts, then its receive counts.
  auto* mine = reinterpret_cast<std::uint64_t*>(lane(ctx_.rank, seq));
  for (std::size_t r = 0; r < w; ++r) {
    mine[r] = c.send_counts[r];
    mine[w + r] = c.recv_counts[r];
  }
  exchange(seq, c, Algorithm::kOneShot, what);
  std::size_t largest = 0;
  peer_at_.assign(w, 0);  // where sender s's block for this rank starts in its input
  for (std::size_t s = 0; s < w; ++s) {
    const auto* sent = reinterpret_cast<const std::uint64_t*>(lane(static_cast<int>(s), seq));
    for (std::size_t d = 0; d < static_cast<std::size_t>(ctx_.rank); ++d) peer_at_[s] += sent[d];
  }
  for (std::size_t s = 0; s < w; ++s) {
    const auto* sender = reinterpret_cast<const std::uint64_t*>(lane(static_cast<int>(s), seq));
    for (std::size_t d = 0; d < w; ++d) {
      const auto* receiver = reinterpret_cast<const std::uint64_t*>(lane(static_cast<int>(d), seq));
      if (sender[d] != receiver[w + s]) {
        throw Error(ErrorCode::kMismatch,
                    fmt::format("all_to_allv counts do not match: rank {} sends {} elements to "
                                "rank {}, which expects {} from it ({})",
                                s, sender[d], d, receiver[w + s], what()));
      }
      if (s != d) largest = std::max<std::size_t>(largest, sender[d]);
    }
  }
  flush_wake(header(), wake_pending_);
  return largest;
}

void ShmBackend::all_to_allv(const Call& c) {
  const std::size_t es = size_of(c.type);
  const auto w = static_cast<std::size_t>(ctx_.size);
  const auto me = static_cast<std::size_t>(ctx_.rank);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  auto* out = static_cast<std::uint8_t*>(c.output);
  const Describe what = describer(c, Algorithm::kOneShot);
  // Posted with the counts, in case the blocks turn out large enough to be read in place.
  if (single_copy_) mine_single_copy_ = reinterpret_cast<std::uint64_t>(in) | kSingleCopyFlag;
  const std::uint64_t counts_step = ++seq_;
  const std::size_t largest = agree_on_counts(c, counts_step, what);
  block_starts(c.send_counts, send_at_);
  block_starts(c.recv_counts, recv_at_);
  cpu::team_copy(call_team_, out + recv_at_[me] * es, in + send_at_[me] * es,
                 c.send_counts[me] * es,
                 c.send_counts[me] * es >= kernels::cpu::kStreamingCopyMinBytes);
  // Every rank decides alike: the counts and the set-up's single-copy vote are the same on all.
  if (single_copy_ && largest * es >= kDirectBlockBytes) {
    return read_blocks(c, counts_step, c.recv_counts, peer_at_, recv_at_, what);
  }
  // Each step moves up to `per` elements of every pair's block, block d of the lane for rank d.
  const std::size_t per = std::max<std::size_t>(1, step_bytes(c) / (es * w));
  for (std::size_t base = 0; base < largest; base += per) {
    const std::uint64_t seq = ++seq_;
    for (std::size_t d = 0; d < w; ++d) {
      const std::size_t n = block_part(c.send_counts[d], base, per);
      if (d == me || n == 0) continue;
      cpu::team_copy(call_team_, lane(ctx_.rank, seq) + d * per * es,
                     in + (send_at_[d] + base) * es, n * es);
    }
    exchange(seq, c, Algorithm::kOneShot, what);
    for (std::size_t s = 0; s < w; ++s) {
      const std::size_t n = block_part(c.recv_counts[s], base, per);
      if (s == me || n == 0) continue;
      cpu::team_copy(call_team_, out + (recv_at_[s] + base) * es,
                     lane(static_cast<int>(s), seq) + me * per * es, n * es);
    }
    flush_wake(header(), wake_pending_);
  }
}

void ShmBackend::gather(const Call& c) {
  const std::size_t es = size_of(c.type);
  const bool root = ctx_.rank == c.root;
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  auto* out = static_cast<std::uint8_t*>(c.output);
  chunked(
      c, step_bytes(c) / es, Algorithm::kOneShot, describer(c, Algorithm::kOneShot),
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        if (!root) copy_in(c, base, n, seq);
      },
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        if (!root) return;
        for (int r = 0; r < ctx_.size; ++r) {
          std::uint8_t* to = out + (static_cast<std::size_t>(r) * c.count + base) * es;
          const std::uint8_t* from = r == ctx_.rank ? in + base * es : lane(r, seq);
          if (from != to) cpu::team_copy(call_team_, to, from, n * es);  // equal: in place
        }
      });
}

void ShmBackend::scatter(const Call& c) {
  const std::size_t es = size_of(c.type);
  const auto w = static_cast<std::size_t>(ctx_.size);
  const auto me = static_cast<std::size_t>(ctx_.rank);
  const bool root = ctx_.rank == c.root;
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  auto* out = static_cast<std::uint8_t*>(c.output);
  chunked(
      c, std::max<std::size_t>(1, step_bytes(c) / (es * w)), Algorithm::kOneShot,
      describer(c, Algorithm::kOneShot),
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        if (!root) return;
        for (std::size_t b = 0; b < w; ++b) {
          if (b == me) continue;
          cpu::team_copy(call_team_, lane(ctx_.rank, seq) + b * n * es,
                         in + (b * c.count + base) * es, n * es);
        }
      },
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        const std::uint8_t* from =
            root ? in + (me * c.count + base) * es : lane(c.root, seq) + me * n * es;
        std::uint8_t* to = out + base * es;
        if (from != to) cpu::team_copy(call_team_, to, from, n * es);  // equal: in place
      });
}

void ShmBackend::reduce(const Call& c) {
  const std::size_t es = size_of(c.type);
  const bool root = ctx_.rank == c.root;
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  chunked(
      c, step_bytes(c) / es, Algorithm::kOneShot, describer(c, Algorithm::kOneShot),
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        if (!root) copy_in(c, base, n, seq);
      },
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        if (!root) return;
        cpu::team_reduce(call_team_, sources(seq, 0, in + base * es, base * es), ctx_.size, n,
                         c.type, c.reduce, static_cast<std::uint8_t*>(c.output) + base * es);
      });
}

}  // namespace tpcomm::transport::shm
