// What every backend is built from: the one description of a rank's place in its group that the
// communicator fills once and every backend factory takes (backends read only the fields they
// need). Backend-specific sizes are the backends' own constants.
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

namespace tpcomm::transport {

namespace shm {
class RegisteredHeap;
}  // namespace shm

struct BackendContext {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Bootstrap> bootstrap;  // rendezvous; its store() holds the backends' keys
  std::uint64_t comm_id = 0;             // unique per communicator: names segments and keys
  std::chrono::milliseconds timeout{60000};
  // How long a GPU kernel's wait for a peer may spin before it gives up (TPCOMM_KERNEL_TIMEOUT_MS);
  // 0: `timeout`. Longer than the host's by default: one rank's host stall shorter than this (a
  // checkpoint or adapter load) must not fail the group's kernels for good.
  std::chrono::milliseconds kernel_timeout{0};
  std::string socket_address = "127.0.0.1";    // where peers reach this rank (gloo's sockets)
  std::vector<int> node_of_rank;               // node index of every rank; empty: one node
  std::size_t shm_workspace_bytes = 1u << 20;  // per rank (TPCOMM_SHM_WORKSPACE): shm, hier
  bool shm_single_copy = true;  // shm may read peers' memory directly (TPCOMM_SHM_SINGLE_COPY)
  // shm all-reduces this large stream their lane fills; 0: never (TPCOMM_SHM_STREAMING_FILL)
  std::size_t shm_streaming_fill_bytes = 16u << 20;
  // How long a shm wait spins before yielding and sleeping, while every rank has a core
  // (TPCOMM_SHM_SPIN_US)
  std::chrono::microseconds shm_spin{1000};
  // Threads of this rank's team for shm calls of at least team_min_bytes (TPCOMM_THREADS,
  // CommunicatorOptions::threads); 0: derived from the rank's CPUs (team/team_size.hpp).
  int threads = 0;
  std::size_t team_min_bytes = 256u << 10;  // the tuning table's team_min_bytes
  // Ranks of the whole group whose processes share this machine's cores (the same kernel: the
  // simulated nodes of `tpcomm run --nodes` included); 0: `size`. Whether a rank may spin
  // depends on them all, not only on its node's: the peer a spinner keeps off a core may be on
  // another node (a hier lane's Gloo).
  int ranks_on_this_machine = 0;
  std::size_t graph_slots = 16384;  // captured calls that may be registered (TPCOMM_GRAPH_SLOTS)
  // Small gloo calls travel with the opening exchange (gloo_opening_exchange.hpp); false: every
  // call runs Gloo's own collective, as PyTorch's Gloo users run it (the bench's Gloo baseline).
  // Every rank of a group must have the same: it sets the size of every message.
  bool gloo_inline = true;
  int cuda_device = 0;     // this rank's CUDA device (GPU backends)
  bool zero_copy = false;  // the graph plan lets user buffers be read in place (custom)
  // The communicator's registered host buffers (Communicator::allocate), read in place by shm.
  std::shared_ptr<shm::RegisteredHeap> registered;
  // Aborts the communicator from another thread (a GPU backend's watchdog).
  std::function<void(const std::string&)> on_async_failure;

  // Whether the ranks are on more than one node.
  bool spans_nodes() const {
    return std::ranges::any_of(node_of_rank, [&](int n) { return n != node_of_rank.front(); });
  }
};

}  // namespace tpcomm::transport
