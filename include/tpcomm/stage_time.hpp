// Where a staged call's time goes: what Communicator::stage_times() reports per stage.
#pragma once

#include <chrono>
#include <string>

namespace tpcomm {

// Time this rank's calls spent in one stage of a staged backend (hier: inside the node, between
// nodes), waits for peers included, since the communicator was made.
struct StageTime {
  std::string name;  // "hier intra-node (shm)", "hier inter-node (gloo)"
  std::chrono::nanoseconds total{0};
};

}  // namespace tpcomm
