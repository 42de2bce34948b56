// The worker's `deterministic` mode (run with TPCOMM_DETERMINISTIC=1): deterministic mode's
// property checks in real processes, for the backends that need them (hier_mpi under mpirun).
#pragma once

#include "tpcomm/tpcomm.hpp"

namespace tpcomm::test {

// all_reduce and reduce_scatter of random slices [a, b) of 70001 elements, float32, bfloat16 and
// float16, each result against the rank-order sum computed here (support/typed_values.hpp):
// all_reduce(x[a:b]) is then all_reduce(x)[a:b] and every rank's bits are the same. Prints
// "rank R: deterministic: N checks, F wrong, backends=B" and returns 0 when none is wrong.
int run_deterministic(Communicator& comm);

}  // namespace tpcomm::test
