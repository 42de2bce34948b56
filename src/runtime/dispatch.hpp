// One call from the gate to a backend (docs/communicator.md, docs/errors.md): its checks, its
// route (the plan's route_call, the one routing function), and its execution, where any failure
// aborts the communicator with an error that names the call, the backend and the peers.
#pragma once

#include <cstddef>

#include "communicator_state.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::runtime {

// The bytes a call is routed by (routed_bytes of its input).
std::uint64_t call_bytes(const transport::Call& call, int size);
// device_call: the overload with a CUDA stream was used.
void run_call(CommunicatorState& c, transport::Call call, bool device_call);
// Communicator::register_graph_buffers: every backend's, in the (map) order every rank shares.
std::size_t register_graph_buffers(CommunicatorState& c);

}  // namespace tpcomm::runtime
