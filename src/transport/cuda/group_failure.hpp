// How a rank that aborts tells the peers' kernels (kernel_codes.hpp, "the group's failure word"):
// the host abort word is host memory of this process, which no peer's kernel reads.
#pragma once

#include <cstdint>
#include <vector>

namespace tpcomm::transport::cuda {

// Unless this rank's copy `own` is set already (the first cause stays), writes `value` into
// each of `words` (device addresses mapped in this process: this rank's workspace and the peers'
// through their mappings) on `stream`, a non-blocking stream of `device`, waiting at most about
// a second for each step. Returns whether it wrote. Never throws: it runs on failure paths,
// maybe in a context a trapped kernel left unusable.
bool publish_group_failure(int device, const std::uint64_t* own,
                           const std::vector<std::uint64_t*>& words, std::uint64_t value,
                           void* stream);

// Whether everything queued on `stream` finished within about a second (polling, never throws).
bool finished_within_a_second(void* stream);

}  // namespace tpcomm::transport::cuda
