// Open MPI as the comparison engine of tpcomm bench --compare mpi: the same operation on the
// same buffers through MPI_COMM_WORLD.
#pragma once

#include <cstddef>
#include <memory>

#include "tpcomm/types.hpp"

namespace tpcomm::cli {

class MpiEngine {
 public:
  // Throws kUnavailable when this tpcomm has no MPI or the ranks were not started by mpirun, and
  // kInvalidInput for a type and reduction MPI cannot do here (fp16; bf16 other than sum).
  MpiEngine(DataType type, ReduceOp redop);
  ~MpiEngine();
  MpiEngine(const MpiEngine&) = delete;
  MpiEngine& operator=(const MpiEngine&) = delete;

  // `per`: elements per rank, as the communicator's call takes them.
  void call(Op op, const void* in, void* out, std::size_t per) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpcomm::cli
