// Describing a buffer for zero-copy registration (shared_buffer.hpp).
#include "shared_buffer.hpp"

#include <fstream>
#include <random>

#include <fmt/format.h>

#include "transport/cuda/driver_api.hpp"

namespace tpcomm::transport::cuda {
namespace {

// A VMM allocation's descriptor, or an empty Fd with the reason.
net::Fd export_vmm(CUdeviceptr address, std::string* why) {
  const DriverApi& d = driver_api();
  CUmemGenericAllocationHandle h = 0;
  const CUresult r = d.mem_retain_allocation_handle(&h, reinterpret_cast<void*>(address));
  if (r != CUDA_SUCCESS) {
    *why =
        fmt::format("neither a cudaMalloc nor a VMM allocation (CUresult {})", static_cast<int>(r));
    return net::Fd();
  }
  int fd = -1;
  const CUresult e = d.mem_export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  d.mem_release(h);  // the retain's reference; the allocation stays its owner's
  if (e != CUDA_SUCCESS) {
    *why = fmt::format("a VMM allocation not created POSIX-fd exportable (CUresult {})",
                       static_cast<int>(e));
    return net::Fd();
  }
  return net::Fd(fd);
}

}  // namespace

// This process among all processes of all nodes: a random token drawn once, mixed with the boot
// id. A pid is not enough: ranks in different PID namespaces, or on different nodes, share pids.
std::uint64_t this_process() {
  static const std::uint64_t token = [] {
    std::random_device rd;
    std::uint64_t t = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string boot;
    std::getline(in, boot);
    for (char c : boot) t = (t ^ static_cast<std::uint8_t>(c)) * 1099511628211ull;  // FNV-1a
    return t;
  }();
  return token;
}

// How this rank can share `input` (how == kNone: why says why not); a VMM buffer's descriptor
// goes to `fd`.
SharedBuffer describe(const void* input, std::size_t bytes, net::Fd* fd, std::string* why) {
  SharedBuffer s{};
  s.process = this_process();
  s.address = reinterpret_cast<std::uintptr_t>(input);
  CUdeviceptr base = 0;
  std::size_t size = 0;
  const CUresult r =
      driver_api().mem_get_address_range(&base, &size, static_cast<CUdeviceptr>(s.address));
  if (r != CUDA_SUCCESS) {
    *why = fmt::format("cuMemGetAddressRange({:#x}) failed ({}): not device memory?", s.address,
                       static_cast<int>(r));
    return s;
  }
  s.offset = s.address - static_cast<std::uint64_t>(base);
  s.size = size;
  // What a peer maps is the allocation holding the buffer's start; a buffer running past it (a
  // tensor across two of PyTorch's expandable-segment chunks, each its own allocation) would be
  // read beyond the mapping.
  if (s.offset + bytes > size) {
    *why = fmt::format(
        "its {} bytes run past the allocation that holds its start ({} bytes from "
        "offset {}): it spans several allocations (expandable segments?)",
        bytes, size - s.offset, s.offset);
    return s;
  }
  if (cudaIpcGetMemHandle(&s.handle, reinterpret_cast<void*>(base)) == cudaSuccess) {
    s.how = kIpcHandle;
    return s;
  }
  cudaGetLastError();
  // VMM allocations (PyTorch's expandable segments) have no legacy IPC handle.
  *fd = export_vmm(base, why);
  if (fd->get() >= 0) s.how = kVmmFd;
  return s;
}

}  // namespace tpcomm::transport::cuda
