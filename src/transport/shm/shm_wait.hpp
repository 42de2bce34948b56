// Waiting on peers in shared memory without hanging and without burning the CPU when ranks
// outnumber cores: spin briefly, then yield, then sleep on a futex in short slices. Every slice
// checks the deadline, the abort word and whether the awaited peers' processes still exist.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "shm_layout.hpp"
#include "tpcomm/deadline.hpp"

namespace tpcomm::transport::shm {

// Wakes sleepers after a publish.
void wake_all(SegmentHeader& header);

// Waits until ready(p) for every peer p != self. `what` names the call for errors, such as
// "all_reduce(float32 x 1024, sum) #7 (shm one_shot)"; it is only called to build one. Throws
// kTimeout naming the ranks that did not arrive, kUnavailable for a dead peer, kAborted when a
// peer aborted.
void wait_for_peers(SegmentHeader& header, RankControl* control, int world, int self,
                    const std::function<bool(const RankControl&)>& ready, const Deadline& deadline,
                    const std::function<std::string()>& what);

}  // namespace tpcomm::transport::shm
