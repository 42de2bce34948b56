// What every backend is built from: the one description of a rank's place in its group that the
// communicator fills once and every backend factory takes (backends read only the fields they
// need). What a single backend takes is its own options struct, declared in its folder.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tpcomm/bootstrap.hpp"
#include "transport/cuda/cuda_options.hpp"
#include "transport/gloo/gloo_options.hpp"
#include "transport/shm/shm_options.hpp"

namespace tpcomm::transport {

struct BackendContext {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Bootstrap> bootstrap;  // rendezvous; its store() holds the backends' keys
  std::uint64_t comm_id = 0;             // unique per communicator: names segments and keys
  std::chrono::milliseconds timeout{60000};
  std::string socket_address = "127.0.0.1";  // where peers reach this rank (gloo's sockets)
  std::vector<int> node_of_rank;             // node index of every rank; empty: one node
  // Ranks of the whole group whose processes share this machine's cores (the same kernel: the
  // simulated nodes of `tpcomm run --nodes` included); 0: `size`. Whether a rank may spin
  // depends on them all, not only on its node's: the peer a spinner keeps off a core may be on
  // another node (a hier lane's Gloo).
  int ranks_on_this_machine = 0;
  // Each backend's own settings, declared in its folder: shm (and hier's shm stage), Gloo (and
  // hier's lanes), the GPU backends.
  shm::ShmOptions shm;
  GlooOptions gloo;
  cuda::CudaOptions cuda;
  // Aborts the communicator from another thread (a GPU backend's watchdog).
  std::function<void(const std::string&)> on_async_failure;

  // Whether the ranks are on more than one node.
  bool spans_nodes() const {
    return std::ranges::any_of(node_of_rank, [&](int n) { return n != node_of_rank.front(); });
  }
};

}  // namespace tpcomm::transport
