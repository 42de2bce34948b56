// The hier backend: CPU groups over several nodes with the same number of ranks on each. An
// all-reduce is a reduce-scatter inside each node over shm, an all-reduce of each slice across
// the nodes over Gloo, or MPI for hier_mpi (one "lane" per local rank index), and an all-gather
// inside each node over shm — so only 1/L of the data crosses the network per rank, L the ranks per
// node. The whole pipeline runs in fp32, rounding fp16/bf16 once at the end.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tpcomm/bootstrap.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"

namespace tpcomm::transport {

std::unique_ptr<CollectiveBackend> make_hier_backend(const BackendContext& context);
// The same with MPI lanes (transport/hier_mpi/hier_mpi_backend.hpp): for a group that is the world
// mpirun started and was bootstrapped through it.
std::unique_ptr<CollectiveBackend> make_hier_mpi_backend(const BackendContext& context);

}  // namespace tpcomm::transport
