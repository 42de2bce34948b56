// How a call's steps lie in the lanes. For W > 2: where a one-step call lies in its lane, and
// taking that place for writing ahead of the fill; at W = 2 the slots take turns (step_slot,
// shm_layout.hpp) and a rank writes the lines it read itself, which both worked around. For any
// W: the wider steps of a call whose every input is read in place.
#include <algorithm>

#include "common/log_format.hpp"
#include "kernels/cpu/prefetch_for_write.hpp"
#include "shm_backend_impl.hpp"

namespace tpcomm::transport::shm {

// Successive steps through one lane move on by their size (rounded to a page) and wrap, so a
// step rarely writes the lines its peers read from that lane the step before last. Measured before
// the slots took turns, at W = 2, one-shot all-reduce on a Xeon VM (2 vCPUs, 512 KiB lanes), in
// place, us, two runs each: 16 KiB 3.38-3.41 -> 2.79-2.80, 4 KiB 1.20-1.21 -> 1.14-1.15, 64 KiB and
// up unchanged (few places in the lane); docs/results/cpu-2026-12-05-impi.md. Every rank numbers
// its steps alike and the call's size is compared before any peer reads, so all agree on the place;
// any place in a lane is free once the step before passed (kLanes).
std::size_t ShmBackend::step_offset(std::uint64_t seq, std::size_t bytes) const {
  // At W = 2 a rank writes where it read: the place stays put.
  if (ctx_.size == 2) return 0;
  const std::size_t room = (bytes + 4095) / 4096 * 4096;
  if (room == 0 || room > lane_bytes_) return 0;
  return (seq / kLanes) % (lane_bytes_ / room) * room;
}

// The peer read this rank's next place a few steps ago, so its lines are shared with the peer,
// and the next fill's stores would each wait for the peer's copy to be invalidated before the
// flag behind them is seen: on the critical path of a small call. Asked for now, the
// invalidations run while the caller is away. W = 2, float32, in place, us, without / with:
// 4 B 0.40 / 0.37, 1 KiB 0.63 / 0.51, 4 KiB 1.15 / 0.93, 16 KiB 2.80 / 2.74; from 32 KiB it
// lost (64 KiB 6.6 / 7.2-7.4: too many lines in flight at once). Those figures are from before
// the slots took turns; at W = 2 the next place now holds lines this rank read itself, already
// its own to write, and taking them changed nothing (4 B-64 KiB alike within the runs' spread),
// so only W > 2 takes its place.
void ShmBackend::take_next_place(std::uint64_t seq, std::size_t bytes) {
  constexpr std::size_t kMaxBytes = 16 << 10;
  if (bytes > kMaxBytes || mine_at_.id || mine_single_copy_ || ctx_.size == 2) return;
  kernels::cpu::prefetch_for_write(lane(ctx_.rank, seq + 1) + step_offset(seq + 1, bytes), bytes);
}

// The plan's steps for W = 2 all-reduces are small (128 KiB) so that the lanes stay in the cache
// beside the caller's buffers. A call whose every input is registered moves nothing through the
// lanes, and there small steps only add waits: 4 MiB took 300-316 us in 128 KiB steps against
// 288-306 in 512 KiB ones. Every rank learns the same from the first step's headers, so from the
// second step on all of them take the lane's default step alike.
std::size_t ShmBackend::in_place_step(const Call& c, Algorithm algorithm, std::size_t per_chunk) {
  if (c.op != Op::kAllReduce || algorithm != Algorithm::kOneShot) return per_chunk;
  for (int r = 0; r < ctx_.size; ++r) {
    if (peer_input(r) == nullptr) return per_chunk;
  }
  const std::size_t wide = std::min(kDefaultStepBytes, lane_bytes_) / size_of(c.type);
  if (wide <= per_chunk) return per_chunk;
  if (!logged_wide_steps_) {
    logged_wide_steps_ = true;
    TPCOMM_LOG(kDebug, "shm",
               "rank {}: call #{} reads every input in place: steps of {} B after "
               "the first",
               ctx_.rank, c.sequence, wide * size_of(c.type));
  }
  return wide;
}

}  // namespace tpcomm::transport::shm
