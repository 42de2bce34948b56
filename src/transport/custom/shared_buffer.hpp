// How a rank describes one of its buffers to its peers for zero-copy registration
// (graph_buffers.cpp): an IPC handle of its cudaMalloc allocation, or its VMM allocation's POSIX
// descriptor, with the process it lives in and where it lies in its allocation.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "control/socket_util.hpp"

namespace tpcomm::transport::cuda {

enum Sharing : std::uint32_t { kNone = 0, kIpcHandle = 1, kVmmFd = 2 };
struct SharedBuffer {
  std::uint32_t how;  // Sharing
  std::uint32_t unused;
  std::uint64_t process;  // this_process(): peers in the same process use `address` as is
  std::uint64_t address;  // the input's address in this process
  std::uint64_t offset;   // from the start of its allocation (what the handle maps)
  std::uint64_t size;     // of that allocation (kVmmFd: what a peer maps)
  cudaIpcMemHandle_t handle;
};
static_assert(sizeof(cudaIpcMemHandle_t) == 64 && sizeof(SharedBuffer) == 104);

// This process among all processes of all nodes: a random token drawn once, mixed with the boot
// id. A pid is not enough: ranks in different PID namespaces, or on different nodes, share pids.
std::uint64_t this_process();

// How this rank can share the `bytes` at `input` (how == kNone: `why` says why not); a VMM
// buffer's descriptor goes to `fd`.
SharedBuffer describe(const void* input, std::size_t bytes, net::Fd* fd, std::string* why);

}  // namespace tpcomm::transport::cuda
