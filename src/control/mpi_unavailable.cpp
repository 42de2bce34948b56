// make_mpi_bootstrap in a build without Open MPI: an error that says how to get it.
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {

std::shared_ptr<Bootstrap> make_mpi_bootstrap(const Deadline&) {
  throw Error(ErrorCode::kUnavailable,
              "this tpcomm was built without MPI (install libopenmpi-dev and rebuild), or export "
              "MASTER_ADDR and MASTER_PORT to rendezvous through a store under mpirun");
}

}  // namespace tpcomm
