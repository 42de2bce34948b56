// The shm backend's algorithms, each a fill and a consume over the step protocol
// (ShmBackend::chunked, shm_backend.cpp): one-shot and two-shot all-reduce, all-gather through the
// lanes or by single-copy reads, reduce-scatter.
#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/streaming_copy.hpp"
#include "kernels/cpu/sum_by_pages.hpp"
#include "shm_backend_impl.hpp"
#include "transport/cpu/single_copy.hpp"
#include "transport/cpu/team_ops.hpp"

namespace tpcomm::transport::shm {

void ShmBackend::one_shot(const Call& c) {
  const std::size_t es = size_of(c.type);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  const std::size_t step = step_bytes(c) / es;
  // A call of one step lies where step_offset puts it in its lane (worked out once: fill and
  // consume both need it), a longer one fills it.
  const std::size_t at = c.count <= step ? step_offset(seq_ + 1, c.count * es) : 0;
  chunked(
      c, step, Algorithm::kOneShot, describer(c, Algorithm::kOneShot),
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        fill_lane(c, lane(ctx_.rank, seq) + at, in + base * es, n * es);
      },
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        const void* const* srcs = sources(seq, at, in + base * es, base * es);
        auto* out = static_cast<std::uint8_t*>(c.output) + base * es;
        // The peer's half comes from its core's cache: W = 2 float32 sums of 64 KiB or more read
        // 8 pages at a time (sum_by_pages.hpp; 64 KiB 6.5 -> 6.1 us, 256 KiB 24 -> 22.1, 1 MiB
        // 100-105 -> 94, 16 MiB 3.0 -> 2.6 ms). Since the slots take turns (data_slot) 32 KiB is
        // as fast in order (3.1-3.9 us either way), 64 KiB still 4.7-4.9 against 4.9-6.0.
        constexpr std::size_t kByPagesFromBytes = 64 << 10;
        if (ctx_.size == 2 && c.type == DataType::kFloat32 && c.reduce == ReduceOp::kSum &&
            call_team_ == nullptr && n * es >= kByPagesFromBytes) {
          kernels::cpu::sum_two_f32_by_pages_with(cpu::chosen_kernel_isa(), srcs, n, out);
        } else {
          cpu::team_reduce(call_team_, srcs, ctx_.size, n, c.type, c.reduce, out);
        }
        if (c.count <= step) take_next_place(seq, n * es);
      });
}

void ShmBackend::all_reduce_single_copy(const Call& c) {
  const std::size_t es = size_of(c.type);
  const std::size_t step = step_bytes(c) / es;
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  if (single_copy_ && !mine_at_.id && c.input != c.output) {
    mine_single_copy_ = reinterpret_cast<std::uint64_t>(in) | kSingleCopyFlag;
  }
  // A step of every rank, grown once and reused: a call allocates nothing after the first.
  if (single_copy_) peer_chunks_.reserve(ctx_.size * step * es);
  chunked(
      c, step, Algorithm::kSingleCopy, describer(c, Algorithm::kSingleCopy),
      [&](std::size_t base, std::size_t n, std::uint64_t seq) { copy_in(c, base, n, seq); },
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        const void* const* srcs = sources(seq, 0, in + base * es, base * es);
        for (int r = 0; r < ctx_.size; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          if (r == ctx_.rank || peer_address_[ur] == 0) continue;
          std::uint8_t* to = peer_chunks_.data() + ur * step * es;
          cpu::team_read_peer(call_team_, r, peer_pid_[ur], peer_address_[ur] + base * es, to,
                              n * es);
          sources_[ur] = to;
        }
        cpu::team_reduce(call_team_, srcs, ctx_.size, n, c.type, c.reduce,
                         static_cast<std::uint8_t*>(c.output) + base * es);
      });
}

void ShmBackend::two_shot(const Call& c) {
  const std::size_t es = size_of(c.type);
  const auto w = static_cast<std::size_t>(ctx_.size);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  const Describe what = describer(c, Algorithm::kTwoShot);
  auto slice = [w](std::size_t n, std::size_t r) {
    const std::size_t lo = n * r / w;
    return std::make_pair(lo, n * (r + 1) / w - lo);
  };
  // The lane gets every slice but this rank's own, which it reduces from `in` into the lane.
  auto fill = [&](std::size_t base, std::size_t n, std::uint64_t seq) {
    const auto [lo, len] = slice(n, static_cast<std::size_t>(ctx_.rank));
    fill_lane(c, lane(ctx_.rank, seq), in + base * es, lo * es);
    fill_lane(c, lane(ctx_.rank, seq) + (lo + len) * es, in + (base + lo + len) * es,
              (n - lo - len) * es);
  };
  chunked(c, step_bytes(c) / es, Algorithm::kTwoShot, what, fill,
          [&](std::size_t base, std::size_t n, std::uint64_t seq) {
            const auto [lo, len] = slice(n, static_cast<std::size_t>(ctx_.rank));
            cpu::team_reduce(call_team_,
                             sources(seq, lo * es, in + (base + lo) * es, (base + lo) * es),
                             ctx_.size, len, c.type, c.reduce, lane(ctx_.rank, seq) + lo * es);
            publish(Flag::kReduced, seq);
            wait(Flag::kReduced, seq, what);
            for (std::size_t r = 0; r < w; ++r) {
              const auto [rlo, rlen] = slice(n, r);
              cpu::team_copy(call_team_, static_cast<std::uint8_t*>(c.output) + (base + rlo) * es,
                             lane(static_cast<int>(r), seq) + rlo * es, rlen * es);
            }
          });
}

void ShmBackend::all_gather(const Call& c) {
  const std::size_t es = size_of(c.type);
  auto* out = static_cast<std::uint8_t*>(c.output);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  const bool direct = single_copy_ && c.algorithm == Algorithm::kSingleCopy;
  if (direct && !mine_at_.id)
    mine_single_copy_ = reinterpret_cast<std::uint64_t>(in) | kSingleCopyFlag;
  chunked(
      c, direct ? std::max<std::size_t>(c.count, 1) : step_bytes(c) / es, c.algorithm,
      describer(c, c.algorithm),
      [&](std::size_t base, std::size_t n, std::uint64_t seq) { copy_in(c, base, n, seq); },
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        for (int r = 0; r < ctx_.size; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          std::uint8_t* to = out + (ur * c.count + base) * es;
          if (peer_address_[ur] != 0 && r != ctx_.rank) {
            cpu::team_read_peer(call_team_, r, peer_pid_[ur], peer_address_[ur] + base * es, to,
                                n * es);
            continue;
          }
          const std::uint8_t* from = r == ctx_.rank && peer_address_[ur] != 0 ? in + base * es
                                     : peer_input(r) ? peer_input(r) + base * es
                                                     : lane(r, seq);
          if (from != to) {  // equal: in place
            cpu::team_copy(call_team_, to, from, n * es,
                           r == ctx_.rank && n * es >= kernels::cpu::kStreamingCopyMinBytes);
          }
        }
      });
}

void ShmBackend::reduce_scatter(const Call& c) {
  const std::size_t es = size_of(c.type);
  const auto w = static_cast<std::size_t>(ctx_.size);
  const auto* in = static_cast<const std::uint8_t*>(c.input);
  chunked(
      c, std::max<std::size_t>(1, step_bytes(c) / (es * w)), Algorithm::kOneShot,
      describer(c, Algorithm::kOneShot),
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        for (std::size_t b = 0; b < w; ++b) {  // not its own block: it reads that from `in`
          if (b == static_cast<std::size_t>(ctx_.rank)) continue;
          cpu::team_copy(call_team_, lane(ctx_.rank, seq) + b * n * es,
                         in + (b * c.count + base) * es, n * es);
        }
      },
      [&](std::size_t base, std::size_t n, std::uint64_t seq) {
        const std::size_t block = static_cast<std::size_t>(ctx_.rank) * c.count + base;
        cpu::team_reduce(
            call_team_,
            sources(seq, static_cast<std::size_t>(ctx_.rank) * n * es, in + block * es, block * es),
            ctx_.size, n, c.type, c.reduce, static_cast<std::uint8_t*>(c.output) + base * es);
      });
}

}  // namespace tpcomm::transport::shm
