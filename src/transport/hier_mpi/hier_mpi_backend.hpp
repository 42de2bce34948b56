// The lanes of the hier_mpi backend (the backend itself is hier with these lanes,
// transport/hier/hier_backend.hpp). A lane: the ranks with one local index on every node, as an MPI
// communicator split from the world mpirun started (control/mpi_world.hpp), running each of the
// lane's stages (all-reduce, all-gather, reduce-scatter, their forms with per-rank counts,
// all_to_all(v), gather, scatter, reduce) as MPI's non-blocking collective of that name (Open
// MPI's TCP transport between nodes). No home-made transport: the bytes travel through MPI.
// Per-peer counts are not compared here: hier checks every rank's before its lane stage.
//
// MPI cannot cancel a collective, so a wait is MPI_Test polled against the call's deadline and
// the abort flag. A call given up on (timeout, abort, a peer's mismatched call) leaves its
// request with MPI: its buffers are kept for as long as the process lives, and the lane refuses
// every later call. Before the data moves, the ranks compare each call (CallIdentity, the same
// that shm and Gloo compare), so a mismatched call is an error that names both calls, not a
// wrong result or a hang.
#pragma once

#include <memory>

#include "control/mpi_world.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"

namespace tpcomm::transport {

// `lane`: this rank's place in the lane (rank, size, timeout); the lane is split from `world`
// with `color` (the local index) and `key` (the node index), so its MPI rank is `lane.rank`.
std::unique_ptr<CollectiveBackend> make_mpi_lane(const BackendContext& lane,
                                                 const control::MpiWorld& world, int color,
                                                 int key);

}  // namespace tpcomm::transport
