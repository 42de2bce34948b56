/* The interface of libtpcomm_mpi.so, the MPI plug-in (docs/packaging.md, "MPI only when used").
 * libtpcomm does not link libmpi: a program that never bootstraps through MPI (a torchrun or
 * `tpcomm run` rank, a Python engine) must not load it. The MPI bootstrap opens this plug-in on
 * demand and sends its messages through these functions; hier_mpi's lanes run their collectives
 * through them. C, so that the plug-in and the library agree without sharing a C++ ABI. Handles
 * are opaque. Every function returns 0 on success, else an MPI error code. The plug-in runs one
 * function at a time per process (MPI_THREAD_SERIALIZED): callers on several threads need no
 * lock of their own. */
#ifndef TPCOMM_MPI_PLUGIN_API_H
#define TPCOMM_MPI_PLUGIN_API_H

#ifdef __cplusplus
extern "C" {
#endif

#define TPCOMM_MPI_API_VERSION 3

/* Element types and reductions of the collectives (hier's stage types: fp32 or the call's own
 * integer type; bytes for an all-gather). */
enum TpcommMpiType {
  TPCOMM_MPI_BYTE = 0,
  TPCOMM_MPI_FLOAT = 1,
  TPCOMM_MPI_INT32 = 2,
  TPCOMM_MPI_INT64 = 3,
  TPCOMM_MPI_UINT8 = 4
};
enum TpcommMpiOp { TPCOMM_MPI_SUM = 0, TPCOMM_MPI_MAX = 1, TPCOMM_MPI_MIN = 2 };

struct TpcommMpiApi {
  int version; /* TPCOMM_MPI_API_VERSION */
  /* Initialises MPI (MPI_THREAD_SERIALIZED) unless the program did, and duplicates
   * MPI_COMM_WORLD, whose errors are returned, not fatal. *initialized_here: whether close()
   * should finalise. */
  int (*open)(void** comm, int* rank, int* size, int* initialized_here);
  void (*close)(void* comm, int finalize);
  /* A non-blocking send of `bytes` bytes; *request is completed (and freed) by test(). */
  int (*isend)(void* comm, const void* data, int bytes, int peer, int tag, void** request);
  int (*test)(void* request, int* done);
  /* *waiting = 1 when a message from `peer` with `tag` can be received; *bytes is its length. */
  int (*iprobe)(void* comm, int peer, int tag, int* waiting, int* bytes);
  int (*recv)(void* comm, void* data, int bytes, int peer, int tag);
  /* The library's version text (MPI_Get_library_version's first line) into `text` (`room` bytes,
   * terminated), and whether calls may come from any thread one at a time (*serialized: the
   * thread level is at least MPI_THREAD_SERIALIZED). */
  int (*describe)(char* text, int room, int* serialized);
  /* MPI_Comm_split of `comm` (collective over it, blocking): the ranks of one `color`, ordered
   * by `key`; its errors are returned. */
  int (*split)(void* comm, int color, int key, void** out, int* rank, int* size);
  void (*free_comm)(void* comm);
  /* Non-blocking collectives; *request as for isend. `in` == `out` reduces in place. */
  int (*iallreduce)(void* comm, const void* in, void* out, int count, int type, int op,
                    void** request);
  int (*iallgather)(void* comm, const void* in, void* out, int count, int type, void** request);
  int (*ireduce_scatter_block)(void* comm, const void* in, void* out, int count, int type, int op,
                               void** request);
  /* Version 3: the lanes' exchanges, blocks of per-rank sizes and rooted calls. Counts and
   * displacements are in elements of `type`, one per rank of `comm`; like the buffers, the
   * arrays must stay valid until the request completes. A root's buffers alone are read or
   * written where only the root has them (gather's out, scatter's in, reduce's out). */
  int (*ialltoallv)(void* comm, const void* in, const int* send_counts, const int* send_displs,
                    void* out, const int* recv_counts, const int* recv_displs, int type,
                    void** request);
  int (*iallgatherv)(void* comm, const void* in, int count, void* out, const int* counts,
                     const int* displs, int type, void** request);
  int (*ireduce_scatter)(void* comm, const void* in, void* out, const int* counts, int type, int op,
                         void** request);
  int (*ireduce)(void* comm, const void* in, void* out, int count, int type, int op, int root,
                 void** request);
  int (*igather)(void* comm, const void* in, void* out, int count, int type, int root,
                 void** request);
  int (*iscatter)(void* comm, const void* in, void* out, int count, int type, int root,
                  void** request);
};

/* The plug-in's one export. */
const struct TpcommMpiApi* tpcomm_mpi_api(void);

#ifdef __cplusplus
}
#endif

#endif
