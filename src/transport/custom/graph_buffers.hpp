// The input buffers of calls captured in CUDA graphs, and their registration (zero-copy).
//
// A captured call gets a slot in a device table: [registered flag, input address of rank 0 ..
// W-1]. The kernel reads the flag at every replay: 0 means copy the input through the
// workspace (the eager protocol, so a graph is correct as captured), 1 means read every rank's
// input where it is. register_all() (a collective call) shares each rank's inputs (CUDA IPC
// handles for cudaMalloc'd memory; the raw address when the peer is a thread of this process),
// votes so that a slot is switched on only where every rank could open every peer's buffer (the
// ranks of one call must agree on the protocol), and writes the slots. Buffers of VMM allocators
// (PyTorch's expandable segments) have no legacy IPC handle: their allocation is exported as a
// POSIX fd (when it was created exportable), one per allocation however many captured calls read
// it, and passed over the node's Unix socket channel in messages of at most kMaxHandleSet; a
// peer imports it once per registration round (an allocator may remap new memory at the same
// address between rounds, so the address is no key).
#pragma once

#include <cuda_runtime_api.h>
#include <chrono>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tpcomm/bootstrap.hpp"
#include "transport/cuda/fd_channel.hpp"
#include "transport/cuda/handle_chunks.hpp"
#include "transport/cuda/kernel_names.hpp"
#include "transport/cuda/vmm_workspace.hpp"

namespace tpcomm::transport::cuda {

struct RegistrationRound;  // one registration (graph_buffers.cpp)
struct SharedBuffer;       // how a rank shares one buffer (shared_buffer.hpp)

// u64 words of one slot: the flag, then one address per rank.
constexpr std::size_t kSlotWords = 1 + kMaxRanks;

class GraphBuffers {
 public:
  GraphBuffers() = default;
  ~GraphBuffers();
  GraphBuffers(const GraphBuffers&) = delete;
  GraphBuffers& operator=(const GraphBuffers&) = delete;

  // Allocates the table of `slots` slots on `device`, the current one (all slots: copy through
  // the workspace). A captured call cannot allocate (cudaMalloc is illegal during a global-mode
  // capture), so the table is sized up front (TPCOMM_GRAPH_SLOTS).
  void create(int device, std::size_t slots);
  // A slot for a captured call reading `bytes` at `input`, or null when the table is full (the
  // call then always copies).
  const std::uint64_t* claim(const void* input, std::size_t bytes);
  // Collective: registers every claimed slot that every rank can share. Returns how many.
  // `listener` (this rank's Unix socket on the fd channel `auth` describes, -1 across nodes)
  // carries the descriptors of VMM buffers, every connection proven with the group's key.
  std::size_t register_all(Bootstrap& bootstrap, int listener, const FdChannelAuth& auth,
                           const Deadline& deadline);

 private:
  // register_all between its barriers (registration_fence.hpp).
  std::size_t register_round(Bootstrap& bootstrap, int listener, const FdChannelAuth& auth,
                             const Deadline& deadline);
  // The phases of register_all that need this object (the others are free functions).
  void exchange_vmm(RegistrationRound& round, Bootstrap& bootstrap, int listener,
                    const FdChannelAuth& auth, const Deadline& deadline);
  void open_peers(RegistrationRound& round, std::size_t i, int me);
  bool peer_access_to(const void* address, bool vmm, std::string* why);
  std::size_t write_slots(RegistrationRound& round, int me);
  void* open_ipc(const cudaIpcMemHandle_t& handle);
  void* open_peer_vmm(const RegistrationRound& round, int r, const SharedBuffer& s);
  void* open_vmm(const VmmImportKey& key, std::size_t bytes, int fd);

  std::uint64_t* slots_ = nullptr;  // device memory, capacity_ x kSlotWords
  std::size_t capacity_ = 0;
  int device_ = 0;
  std::uint64_t* staging_ = nullptr;  // pinned host memory: one slot's words on their way
  std::size_t used_ = 0;
  struct Pending {
    std::size_t slot;
    const void* input;
    std::size_t bytes;  // the extent registration must find inside one allocation
  };
  std::vector<Pending> pending_;              // claimed, not yet registered
  std::map<std::string, void*> opened_;       // IPC handle bytes -> mapped base
  VmmWorkspace vmm_peers_;                    // peers' VMM buffers mapped here
  std::map<VmmImportKey, void*> vmm_opened_;  // (rank, round, allocation)
  bool full_reported_ = false;
  std::uint32_t registrations_ = 0;  // the round tag of the next VMM descriptor exchange
  HandleMailbox mailbox_;            // a fast peer's descriptors of a later registration
};

}  // namespace tpcomm::transport::cuda
