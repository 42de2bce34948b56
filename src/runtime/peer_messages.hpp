// Point-to-point messages (Communicator::send, recv, isend, irecv, wait): checked on the calling
// rank, routed by the plan's send_recv row (both ranks route a message of the same count and
// type alike), started and completed on that backend. Not collective: they take no number of
// the communicator's call sequence (which every rank shares), skip TPCOMM_CHECK, and the peers
// of a message alone take part. A failure aborts the communicator like a collective's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "transport/common/backend.hpp"

namespace tpcomm::runtime {

struct CommunicatorState;

// The messages started and not yet waited for, by the handle Communicator returned.
struct PeerMessages {
  struct Started {
    transport::PeerMessage message;
    Backend backend;
    Algorithm algorithm;
    std::uint64_t handle;  // the backend's
  };
  std::map<std::uint64_t, Started> started;
  std::uint64_t count = 0;  // messages started so far (their numbers)
};

// device_call: the overload with a CUDA stream was used.
std::uint64_t start_message(CommunicatorState& c, transport::PeerMessage m, bool device_call);
// Returns the message's peer (a receive from any rank: its sender).
int wait_message(CommunicatorState& c, std::uint64_t request);

}  // namespace tpcomm::runtime
