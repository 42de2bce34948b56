// The worker's `fork` mode (worker_fork.cpp).
#pragma once

#include <memory>

#include "tpcomm/tpcomm.hpp"

namespace tpcomm::test {

// Forks; returns the exit status of whichever process returns (*is_child says which).
int run_fork(std::unique_ptr<Communicator>& comm, bool* is_child);

}  // namespace tpcomm::test
