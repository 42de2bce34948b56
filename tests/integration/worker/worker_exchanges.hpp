// The worker's exchange and rooted checks (part of `correctness`): all_to_all, all_to_allv with
// uneven blocks (zeros among them), all_gatherv, reduce_scatterv, and gather, scatter and reduce
// from the first and the last rank, in bfloat16 and int64, each element against values computed
// here from (sender, receiver, element), independently of tpcomm.
#pragma once

#include <string>

#include "tpcomm/tpcomm.hpp"

namespace tpcomm::test {

// Runs the calls; returns how many checks failed (printing the first few) and adds the number of
// checks to `*checks`.
int check_exchange_calls(Communicator& comm, int* checks);

// "hier_mpi" or "gloo,hier": the backends that carried the calls above (the statistics), each
// once, sorted.
std::string exchange_backends(const Communicator& comm);

}  // namespace tpcomm::test
