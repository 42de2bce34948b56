// How a rank describes its buffers to its peers for zero-copy registration (graph_buffers.cpp):
// an IPC handle of a buffer's cudaMalloc allocation, or the POSIX descriptor of its VMM
// allocation (one per allocation, however many buffers it holds), with the process it lives in
// and where it lies in its allocation.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "control/socket_util.hpp"
#include "transport/cuda/handle_chunks.hpp"
#include "transport/cuda/process_token.hpp"

namespace tpcomm::transport::cuda {

enum Sharing : std::uint32_t { kNone = 0, kIpcHandle = 1, kVmmFd = 2 };
struct SharedBuffer {
  std::uint32_t how;         // Sharing
  std::uint32_t allocation;  // kVmmFd: its allocation among this rank's exports of the round
  std::uint64_t process;     // this_process(): peers in the same process use `address` as is
  std::uint64_t address;     // the input's address in this process
  std::uint64_t offset;      // from the start of its allocation (what the handle maps)
  std::uint64_t size;        // of that allocation (kVmmFd: what a peer maps)
  cudaIpcMemHandle_t handle;
};
static_assert(sizeof(cudaIpcMemHandle_t) == 64 && sizeof(SharedBuffer) == 104);

// One round's descriptions of this rank's buffers.
struct Descriptions {
  std::vector<SharedBuffer> buffers;
  std::vector<std::string> why;              // buffer i: why it cannot be shared (how == kNone)
  std::vector<AllocationRange> allocations;  // the VMM allocations, by SharedBuffer::allocation
  std::vector<net::Fd> exported;             // each one's descriptor (empty: not exportable)
};

// How this rank can share each (address, bytes) of `inputs`. Buffers of one VMM allocation share
// one exported descriptor.
Descriptions describe_all(const std::vector<std::pair<const void*, std::size_t>>& inputs);

}  // namespace tpcomm::transport::cuda
