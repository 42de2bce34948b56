// make_mpi_bootstrap in a build without Open MPI: an error that says how to get it; and no MPI
// world behind any bootstrap.
#include "mpi_world.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {

std::shared_ptr<Bootstrap> make_mpi_bootstrap(const Deadline&) {
  throw Error(ErrorCode::kUnavailable,
              "this tpcomm was built without MPI (install libopenmpi-dev and rebuild), or export "
              "MASTER_ADDR and MASTER_PORT to rendezvous through a store under mpirun");
}

namespace control {

std::optional<MpiWorld> mpi_world_of(const Bootstrap&, std::string* why) {
  if (why) *why = "this tpcomm was built without MPI";
  return std::nullopt;
}

void mark_mpi_world_failed(const std::string&) {}

}  // namespace control
}  // namespace tpcomm
