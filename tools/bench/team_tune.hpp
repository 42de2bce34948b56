// tpcomm tune's team threshold: from which size a rank's team of threads (TPCOMM_THREADS) beats
// the calling thread alone, for the tuning entry's team_min_bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tune_candidates.hpp"

namespace tpcomm::cli {

// The team size tune measures for a group of a.ranks: --threads, else TPCOMM_THREADS, else the
// share of this machine's cores each rank gets.
int team_threads_to_tune(const TuneArgs& a);

// Times the all-reduce path `entry` chose for its largest sizes with a team of
// team_threads_to_tune(a) from every size and with one thread, in alternating rounds; returns
// the smallest size from which the team is faster at every larger size measured (nullopt, with
// the reason printed, when there is no team to time, the path is not shm's, or the team never
// wins, in which case the entry says so with a threshold above every size).
std::optional<std::uint64_t> tune_team_min_bytes(const TuneArgs& a, const TuningEntry& entry,
                                                 const std::string& self, const std::string& dir);

}  // namespace tpcomm::cli
