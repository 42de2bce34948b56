// The MPI world behind a group bootstrapped through MPI (mpirun without MASTER_ADDR): what
// hier_mpi's lanes split their communicators from, and what a rank's facts say of MPI. Reached
// only through the bootstrap that holds it, so it is the same world the group's ranks were
// numbered by, and it outlives every lane that holds that bootstrap (MPI_Finalize last).
#pragma once

#include <optional>
#include <string>

#include "mpi_plugin_api.h"
#include "tpcomm/bootstrap.hpp"

namespace tpcomm::control {

struct MpiWorld {
  const TpcommMpiApi* api = nullptr;
  void* comm = nullptr;  // the bootstrap's duplicate of MPI_COMM_WORLD
  int rank = 0;
  int size = 1;
  std::string library;  // "Open MPI v4.1.4, ..." (MPI_Get_library_version's first line)
};

// The world of `bootstrap` when it is the MPI bootstrap and MPI takes calls from any thread one
// at a time (MPI_THREAD_SERIALIZED or more); otherwise nullopt, and `why` (when given) says why.
std::optional<MpiWorld> mpi_world_of(const Bootstrap& bootstrap, std::string* why = nullptr);

// A collective over the world failed or was aborted in this process (a lane gave up, the
// communicator aborted): MPI_Finalize, which waits for every rank of the job, may then never
// return, so the MPI bootstrap skips it when it ends, and mpirun ends the job when this process
// exits. The first reason is kept; process-wide.
void mark_mpi_world_failed(const std::string& why);

}  // namespace tpcomm::control
