// libtpcomm_mpi.so: the MPI plug-in (mpi_plugin_api.h). The only code of tpcomm that links
// libmpi; the C API only (Open MPI's deprecated C++ bindings would need libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "mpi_plugin_api.h"

namespace {

// MPI_THREAD_SERIALIZED: one MPI call at a time in the process, whichever thread makes it (the
// bootstrap on the caller's thread, hier_mpi's lanes on each communicator's).
std::mutex& mpi_mutex() {
  static std::mutex mutex;
  return mutex;
}
using Serialized = std::lock_guard<std::mutex>;

MPI_Comm* as_comm(void* comm) {
  return static_cast<MPI_Comm*>(comm);
}

MPI_Datatype datatype(int type) {
  switch (type) {
    case TPCOMM_MPI_FLOAT:
      return MPI_FLOAT;
    case TPCOMM_MPI_INT32:
      return MPI_INT32_T;
    case TPCOMM_MPI_INT64:
      return MPI_INT64_T;
    case TPCOMM_MPI_UINT8:
      return MPI_UINT8_T;
    default:
      return MPI_BYTE;
  }
}

// uint8 reductions of our own: Open MPI 4.1's vector reductions (its op/avx component, chosen on
// any AVX2 or AVX-512 machine) saturate 8-bit sums (255, not the wrapped 44, for 50 + 250 + 100
// + 150: measured here, open-mpi/ompi#8045, closed "wontfix"), and 4.1.4 got unsigned minimums
// wrong (open-mpi/ompi#10648). A user-defined op is never vectorised by Open MPI.
template <typename Combine>
// NOLINTNEXTLINE(readability-non-const-parameter): MPI_User_function's signature
void each_byte(void* in, void* inout, int* count, Combine combine) {
  auto* a = static_cast<const std::uint8_t*>(in);
  auto* b = static_cast<std::uint8_t*>(inout);
  for (int i = 0; i < *count; ++i) b[i] = combine(a[i], b[i]);
}
void u8_sum(void* in, void* inout, int* count, MPI_Datatype*) {
  each_byte(in, inout, count,
            [](std::uint8_t a, std::uint8_t b) { return static_cast<std::uint8_t>(a + b); });
}
void u8_max(void* in, void* inout, int* count, MPI_Datatype*) {
  each_byte(in, inout, count, [](std::uint8_t a, std::uint8_t b) { return a > b ? a : b; });
}
void u8_min(void* in, void* inout, int* count, MPI_Datatype*) {
  each_byte(in, inout, count, [](std::uint8_t a, std::uint8_t b) { return a < b ? a : b; });
}

// Called with the MPI mutex held, after MPI_Init.
MPI_Op operation(int op, int type) {
  if (type == TPCOMM_MPI_UINT8) {
    static MPI_Op own[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
    static MPI_User_function* const functions[3] = {u8_sum, u8_max, u8_min};
    const int i = op == TPCOMM_MPI_MAX ? 1 : op == TPCOMM_MPI_MIN ? 2 : 0;
    if (own[i] == MPI_OP_NULL) MPI_Op_create(functions[i], 1, &own[i]);
    return own[i];
  }
  return op == TPCOMM_MPI_MAX ? MPI_MAX : op == TPCOMM_MPI_MIN ? MPI_MIN : MPI_SUM;
}

// A new request for a non-blocking call, handed out only if the call started.
template <typename Start>
int start_request(void** request, Start start) {
  auto* req = new (std::nothrow) MPI_Request(MPI_REQUEST_NULL);
  if (req == nullptr) return MPI_ERR_NO_MEM;
  Serialized lock(mpi_mutex());
  if (int rc = start(req)) {
    delete req;
    return rc;
  }
  *request = req;
  return MPI_SUCCESS;
}

int open_world(void** comm, int* rank, int* size, int* initialized_here) {
  Serialized lock(mpi_mutex());
  int initialized = 0;
  MPI_Initialized(&initialized);
  *initialized_here = 0;
  if (!initialized) {
    // hier_mpi's lanes all-reduce with MPI_Iallreduce, whose Open MPI default for a few processes
    // is a binomial tree: its root receives and sends every byte, twice a ring's on a link-bound
    // network (6 ranks on 3 simulated nodes at 1 Gbit/s, 4 MiB: 120 ms, against 52 ms with the
    // ring, docs/communicator.md). The ring unless the user chose (overwrite = 0).
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
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
  MPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN);
  MPI_Comm_rank(*dup, rank);
  MPI_Comm_size(*dup, size);
  *comm = dup;
  return MPI_SUCCESS;
}

void free_comm(void* comm) {
  Serialized lock(mpi_mutex());
  MPI_Comm_free(as_comm(comm));
  delete as_comm(comm);
}

void close_world(void* comm, int finalize) {
  free_comm(comm);
  Serialized lock(mpi_mutex());
  if (finalize) MPI_Finalize();
}

int isend(void* comm, const void* data, int bytes, int peer, int tag, void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Isend(data, bytes, MPI_BYTE, peer, tag, *as_comm(comm), req);
  });
}

int test(void* request, int* done) {
  auto* req = static_cast<MPI_Request*>(request);
  int rc = 0;
  {
    Serialized lock(mpi_mutex());
    rc = MPI_Test(req, done, MPI_STATUS_IGNORE);
  }
  if (rc == MPI_SUCCESS && *done) delete req;
  return rc;
}

int iprobe(void* comm, int peer, int tag, int* waiting, int* bytes) {
  Serialized lock(mpi_mutex());
  MPI_Status status;
  if (int rc = MPI_Iprobe(peer, tag, *as_comm(comm), waiting, &status)) return rc;
  *bytes = 0;
  return *waiting ? MPI_Get_count(&status, MPI_BYTE, bytes) : MPI_SUCCESS;
}

int recv(void* comm, void* data, int bytes, int peer, int tag) {
  Serialized lock(mpi_mutex());
  return MPI_Recv(data, bytes, MPI_BYTE, peer, tag, *as_comm(comm), MPI_STATUS_IGNORE);
}

int describe(char* text, int room, int* serialized) {
  Serialized lock(mpi_mutex());
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (int rc = MPI_Get_library_version(version, &length)) return rc;
  const char* end = std::strchr(version, '\n');
  const int line = static_cast<int>(end ? end - version : std::strlen(version));
  const int n = line < room - 1 ? line : room - 1;
  std::memcpy(text, version, static_cast<std::size_t>(n > 0 ? n : 0));
  if (room > 0) text[n > 0 ? n : 0] = '\0';
  int level = MPI_THREAD_SINGLE;
  if (int rc = MPI_Query_thread(&level)) return rc;
  *serialized = level >= MPI_THREAD_SERIALIZED ? 1 : 0;
  return MPI_SUCCESS;
}

int split(void* comm, int color, int key, void** out, int* rank, int* size) {
  auto* part = new (std::nothrow) MPI_Comm(MPI_COMM_NULL);
  if (part == nullptr) return MPI_ERR_NO_MEM;
  Serialized lock(mpi_mutex());
  if (int rc = MPI_Comm_split(*as_comm(comm), color, key, part)) {
    delete part;
    return rc;
  }
  MPI_Comm_set_errhandler(*part, MPI_ERRORS_RETURN);
  MPI_Comm_rank(*part, rank);
  MPI_Comm_size(*part, size);
  *out = part;
  return MPI_SUCCESS;
}

int iallreduce(void* comm, const void* in, void* out, int count, int type, int op, void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, count, datatype(type),
                          operation(op, type), *as_comm(comm), req);
  });
}

int iallgather(void* comm, const void* in, void* out, int count, int type, void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Iallgather(in, count, datatype(type), out, count, datatype(type), *as_comm(comm),
                          req);
  });
}

int ireduce_scatter_block(void* comm, const void* in, void* out, int count, int type, int op,
                          void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Ireduce_scatter_block(in, out, count, datatype(type), operation(op, type),
                                     *as_comm(comm), req);
  });
}

int ialltoallv(void* comm, const void* in, const int* send_counts, const int* send_displs,
               void* out, const int* recv_counts, const int* recv_displs, int type,
               void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Ialltoallv(in, send_counts, send_displs, datatype(type), out, recv_counts,
                          recv_displs, datatype(type), *as_comm(comm), req);
  });
}

int iallgatherv(void* comm, const void* in, int count, void* out, const int* counts,
                const int* displs, int type, void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Iallgatherv(in, count, datatype(type), out, counts, displs, datatype(type),
                           *as_comm(comm), req);
  });
}

int ireduce_scatter(void* comm, const void* in, void* out, const int* counts, int type, int op,
                    void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Ireduce_scatter(in, out, counts, datatype(type), operation(op, type), *as_comm(comm),
                               req);
  });
}

int ireduce(void* comm, const void* in, void* out, int count, int type, int op, int root,
            void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Ireduce(in, out, count, datatype(type), operation(op, type), root, *as_comm(comm),
                       req);
  });
}

int igather(void* comm, const void* in, void* out, int count, int type, int root, void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Igather(in, count, datatype(type), out, count, datatype(type), root, *as_comm(comm),
                       req);
  });
}

int iscatter(void* comm, const void* in, void* out, int count, int type, int root, void** request) {
  return start_request(request, [&](MPI_Request* req) {
    return MPI_Iscatter(in, count, datatype(type), out, count, datatype(type), root, *as_comm(comm),
                        req);
  });
}

const TpcommMpiApi kApi = {TPCOMM_MPI_API_VERSION,
                           open_world,
                           close_world,
                           isend,
                           test,
                           iprobe,
                           recv,
                           describe,
                           split,
                           free_comm,
                           iallreduce,
                           iallgather,
                           ireduce_scatter_block,
                           ialltoallv,
                           iallgatherv,
                           ireduce_scatter,
                           ireduce,
                           igather,
                           iscatter};

}  // namespace

extern "C" __attribute__((visibility("default"))) const TpcommMpiApi* tpcomm_mpi_api(void) {
  return &kApi;
}
