// Opens libtpcomm_mpi.so, the MPI plug-in (mpi_plugin_api.h), the first time a group is
// bootstrapped through MPI: libtpcomm itself does not link libmpi, so that the programs that
// never use MPI (torchrun and `tpcomm run` ranks, Python engines) do not load it.
#pragma once

#include "mpi_plugin_api.h"

namespace tpcomm::control {

// The plug-in's functions, loaded once: TPCOMM_MPI_PLUGIN, else libtpcomm_mpi.so beside the
// library (or program) holding this code or in its ../lib, then the build's and the install's
// lib folders, then the loader's own search path. Throws kUnavailable naming each place tried
// and why it failed.
const TpcommMpiApi& mpi_plugin();

}  // namespace tpcomm::control
