/* The interface of libtpcomm_mpi.so, the MPI plug-in (docs/packaging.md, "MPI only when used").
 * libtpcomm does not link libmpi: a program that never bootstraps through MPI (a torchrun or
 * `tpcomm run` rank, a Python engine) must not load it. The MPI bootstrap opens this plug-in on
 * demand and sends its messages through these functions, which are all it needs of MPI. C, so
 * that the plug-in and the library agree without sharing a C++ ABI. Handles are opaque. Every
 * function returns 0 on success, else an MPI error code. */
#ifndef TPCOMM_MPI_PLUGIN_API_H
#define TPCOMM_MPI_PLUGIN_API_H

#ifdef __cplusplus
extern "C" {
#endif

#define TPCOMM_MPI_API_VERSION 1

struct TpcommMpiApi {
  int version; /* TPCOMM_MPI_API_VERSION */
  /* Initialises MPI (MPI_THREAD_SERIALIZED) unless the program did, and duplicates
   * MPI_COMM_WORLD. *initialized_here: whether close() should finalise. */
  int (*open)(void** comm, int* rank, int* size, int* initialized_here);
  void (*close)(void* comm, int finalize);
  /* A non-blocking send of `bytes` bytes; *request is completed (and freed) by test(). */
  int (*isend)(void* comm, const void* data, int bytes, int peer, int tag, void** request);
  int (*test)(void* request, int* done);
  /* *waiting = 1 when a message from `peer` with `tag` can be received; *bytes is its length. */
  int (*iprobe)(void* comm, int peer, int tag, int* waiting, int* bytes);
  int (*recv)(void* comm, void* data, int bytes, int peer, int tag);
};

/* The plug-in's one export. */
const struct TpcommMpiApi* tpcomm_mpi_api(void);

#ifdef __cplusplus
}
#endif

#endif
