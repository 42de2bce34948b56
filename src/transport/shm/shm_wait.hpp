// Waiting on peers in shared memory without hanging and without burning the CPU when ranks
// outnumber cores: spin, then yield, then sleep on a futex in short slices. Every slice checks
// the deadline, the abort word and whether the awaited peers' processes still exist.
//
// Waking sleepers costs a full fence (a publish must be visible before `sleepers` is read), and a
// fence right after a publish stalls until the store has left the core. So a publish only marks
// a wake as pending; it is flushed after a few spins of the next wait, before yielding or
// sleeping, or at the end of the step, by when the store has drained and the fence is cheap.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "shm_layout.hpp"
#include "tpcomm/deadline.hpp"

namespace tpcomm::transport::shm {

// Wakes ranks asleep on the segment's futex, if any (a fence and one shared read when none).
void wake_sleepers(SegmentHeader& header);

// Flushes a pending wake.
inline void flush_wake(SegmentHeader& header, bool& wake_pending) {
  if (wake_pending) {
    wake_sleepers(header);
    wake_pending = false;
  }
}

// What a non-zero SegmentHeader::aborted_by says: "rank r aborted the group" or "rank r closed
// the communicator".
std::string stopped_by_text(std::int32_t aborted_by);

// Whether `ranks` processes on this machine each have a core of their own.
bool ranks_have_own_cores(int ranks);

// Waits until flag(control[p], which, seq) >= seq for every peer p != self: spinning for up to
// `spin` (a few rounds when 0: pass 0 unless every rank has a core of its own; longer, up to
// 20 ms, while every late peer is runnable on another CPU; yielding every 300 us), then yielding,
// then asleep, for at most `timeout` from the end of the spinning (the clock is not read by a wait
// that ends within the first few dozen spins, the common case). `what` names the call for
// errors, such as "all_reduce(float32 x 1024, sum) #7 (shm one_shot)"; it is only called to
// build one. Throws kTimeout naming the ranks that did not arrive, kUnavailable for a dead peer,
// kAborted when a peer aborted.
void wait_for_peers(SegmentHeader& header, RankControl* control, int world, int self, Flag which,
                    std::uint64_t seq, std::chrono::milliseconds timeout,
                    std::chrono::microseconds spin, const std::function<std::string()>& what,
                    bool& wake_pending);

}  // namespace tpcomm::transport::shm
