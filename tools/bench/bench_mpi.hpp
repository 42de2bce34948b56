// Open MPI as the comparison engine of tpcomm bench --compare mpi: the same operation on the
// same buffers through MPI_COMM_WORLD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tpcomm/error.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::cli {

// Why Open MPI cannot run this sweep here (the error to throw), or nothing: this tpcomm built
// without it (kUnavailable), a type and reduction it has no operation for (fp16 reductions; bf16
// other than sum), or more elements per rank than MPI's int counts hold. The launcher asks before
// it starts mpirun, so a refusal is one line, not a rank's error amid mpirun's abort report.
std::optional<Error> mpi_refusal(Op op, DataType type, ReduceOp redop, std::uint64_t max_bytes);

class MpiEngine {
 public:
  // Throws kUnavailable when this tpcomm has no MPI or the ranks were not started by mpirun, and
  // kInvalidInput where mpi_refusal refuses.
  MpiEngine(Op op, DataType type, ReduceOp redop, std::uint64_t max_bytes);
  ~MpiEngine();
  MpiEngine(const MpiEngine&) = delete;
  MpiEngine& operator=(const MpiEngine&) = delete;

  // `per`: elements per rank, as the communicator's call takes them.
  void call(Op op, const void* in, void* out, std::size_t per) const;
  // MPI_Alltoallv of blocks back to back in rank order, and MPI_Send / MPI_Recv.
  void all_to_allv(const void* in, const std::vector<std::size_t>& send, void* out,
                   const std::vector<std::size_t>& recv) const;
  void send(const void* in, std::size_t count, int peer) const;
  void recv(void* out, std::size_t count, int peer) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpcomm::cli
