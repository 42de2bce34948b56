// Describing buffers for zero-copy registration (shared_buffer.hpp).
#include "shared_buffer.hpp"

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

// Describes `input` up to its sharing: kIpcHandle when its allocation has a legacy IPC handle;
// otherwise how stays kNone and *vmm is set where it may be a VMM allocation (`range`).
SharedBuffer describe_one(const void* input, std::size_t bytes, AllocationRange* range, bool* vmm,
                          std::string* why) {
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
  *range = AllocationRange{static_cast<std::uint64_t>(base), size};
  *vmm = true;
  return s;
}

}  // namespace

Descriptions describe_all(const std::vector<std::pair<const void*, std::size_t>>& inputs) {
  Descriptions d;
  d.buffers.resize(inputs.size());
  d.why.resize(inputs.size());
  std::vector<std::size_t> vmm_buffers;
  std::vector<AllocationRange> vmm_ranges;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    AllocationRange range;
    bool vmm = false;
    d.buffers[i] = describe_one(inputs[i].first, inputs[i].second, &range, &vmm, &d.why[i]);
    if (!vmm) continue;
    vmm_buffers.push_back(i);
    vmm_ranges.push_back(range);
  }
  // One descriptor per allocation (docs/gpu-graphs.md, "Registering graph buffers in VMM memory"):
  // an engine's thousands of captured calls read a few allocations, and each descriptor costs an
  // open file on every peer.
  AllocationGroups groups = group_by_allocation(vmm_ranges);
  d.allocations = std::move(groups.allocations);
  std::vector<std::string> export_why(d.allocations.size());
  for (std::size_t a = 0; a < d.allocations.size(); ++a)
    d.exported.push_back(export_vmm(d.allocations[a].base, &export_why[a]));
  for (std::size_t k = 0; k < vmm_buffers.size(); ++k) {
    SharedBuffer& s = d.buffers[vmm_buffers[k]];
    s.allocation = groups.of_buffer[k];
    if (d.exported[s.allocation].get() >= 0) {
      s.how = kVmmFd;
    } else {
      d.why[vmm_buffers[k]] = export_why[s.allocation];
    }
  }
  return d;
}

}  // namespace tpcomm::transport::cuda
