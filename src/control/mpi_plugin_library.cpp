// libtpcomm_mpi.so: the MPI plug-in (mpi_plugin_api.h). The only code of tpcomm that links
// libmpi; the C API only (Open MPI's deprecated C++ bindings would need libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <new>

#include "mpi_plugin_api.h"

namespace {

MPI_Comm* as_comm(void* comm) {
  return static_cast<MPI_Comm*>(comm);
}

int open_world(void** comm, int* rank, int* size, int* initialized_here) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  *initialized_here = 0;
  if (!initialized) {
    int provided = 0;
    if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided)) return rc;
    *initialized_here = 1;
  }
  auto* dup = new (std::nothrow) MPI_Comm(MPI_COMM_NULL);
  if (dup == nullptr) return MPI_ERR_NO_MEM;
  if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, dup)) {
    delete dup;
    return rc;
  }
  MPI_Comm_rank(*dup, rank);
  MPI_Comm_size(*dup, size);
  *comm = dup;
  return MPI_SUCCESS;
}

void close_world(void* comm, int finalize) {
  MPI_Comm_free(as_comm(comm));
  delete as_comm(comm);
  if (finalize) MPI_Finalize();
}

int isend(void* comm, const void* data, int bytes, int peer, int tag, void** request) {
  auto* req = new (std::nothrow) MPI_Request(MPI_REQUEST_NULL);
  if (req == nullptr) return MPI_ERR_NO_MEM;
  if (int rc = MPI_Isend(data, bytes, MPI_BYTE, peer, tag, *as_comm(comm), req)) {
    delete req;
    return rc;
  }
  *request = req;
  return MPI_SUCCESS;
}

int test(void* request, int* done) {
  auto* req = static_cast<MPI_Request*>(request);
  const int rc = MPI_Test(req, done, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS && *done) delete req;
  return rc;
}

int iprobe(void* comm, int peer, int tag, int* waiting, int* bytes) {
  MPI_Status status;
  if (int rc = MPI_Iprobe(peer, tag, *as_comm(comm), waiting, &status)) return rc;
  *bytes = 0;
  return *waiting ? MPI_Get_count(&status, MPI_BYTE, bytes) : MPI_SUCCESS;
}

int recv(void* comm, void* data, int bytes, int peer, int tag) {
  return MPI_Recv(data, bytes, MPI_BYTE, peer, tag, *as_comm(comm), MPI_STATUS_IGNORE);
}

const TpcommMpiApi kApi = {
    TPCOMM_MPI_API_VERSION, open_world, close_world, isend, test, iprobe, recv};

}  // namespace

extern "C" __attribute__((visibility("default"))) const TpcommMpiApi* tpcomm_mpi_api(void) {
  return &kApi;
}
