// Registration of captured calls' input buffers (graph_buffers.hpp).
#include "graph_buffers.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "tpcomm/error.hpp"
#include "tpcomm/log.hpp"
#include "transport/cuda/driver_api.hpp"
#include "transport/cuda/fd_channel.hpp"

namespace tpcomm::transport::cuda {
namespace {

// What a rank tells its peers about one buffer.
enum Sharing : std::uint32_t { kNone = 0, kIpcHandle = 1, kVmmFd = 2 };
struct SharedBuffer {
  std::uint32_t how;      // Sharing
  std::int32_t pid;       // peers in the same process use `address` as is
  std::uint64_t address;  // the input's address in this process
  std::uint64_t offset;   // from the start of its allocation (what the handle maps)
  std::uint64_t size;     // of that allocation (kVmmFd: what a peer maps)
  cudaIpcMemHandle_t handle;
};
static_assert(sizeof(cudaIpcMemHandle_t) == 64 && sizeof(SharedBuffer) == 96);

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

// How this rank can share `input` (how == kNone: why says why not); a VMM buffer's descriptor
// goes to `fd`.
SharedBuffer describe(const void* input, net::Fd* fd, std::string* why) {
  SharedBuffer s{};
  s.pid = static_cast<std::int32_t>(getpid());
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

template <typename T>
Bytes as_bytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <typename T>
std::vector<T> from_bytes(const Bytes& b, std::size_t n, int rank) {
  if (b.size() != n * sizeof(T)) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("register_graph_buffers: rank {} sent {} bytes, expected {}", rank,
                            b.size(), n * sizeof(T)));
  }
  std::vector<T> v(n);
  if (n > 0) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

}  // namespace

void* GraphBuffers::open_ipc(const cudaIpcMemHandle_t& handle) {
  const std::string key(reinterpret_cast<const char*>(&handle), sizeof(handle));
  auto it = opened_.find(key);
  if (it != opened_.end()) return it->second;
  void* base = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(ErrorCode::kUnavailable,
                fmt::format("cudaIpcOpenMemHandle: {}", cudaGetErrorString(e)));
  }
  return opened_.emplace(key, base).first->second;
}

void* GraphBuffers::open_vmm(int rank, std::uint64_t their_base, std::size_t bytes, int fd) {
  const std::pair<int, std::uint64_t> key{rank, their_base};
  auto it = vmm_opened_.find(key);
  if (it != vmm_opened_.end()) return it->second;
  return vmm_opened_.emplace(key, vmm_peers_.map_peer(fd, bytes)).first->second;
}

GraphBuffers::~GraphBuffers() {
  for (auto& [key, base] : opened_) cudaIpcCloseMemHandle(base);
  if (slots_ != nullptr) cudaFree(slots_);
}

void GraphBuffers::create(int device) {
  vmm_peers_.use_device(device);
  const std::size_t bytes = kGraphSlots * kSlotWords * sizeof(std::uint64_t);
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), "cudaMalloc (graph buffer slots)");
  slots_ = static_cast<std::uint64_t*>(p);
  check_cuda(cudaMemset(slots_, 0, bytes), "cudaMemset (graph buffer slots)");
}

const std::uint64_t* GraphBuffers::claim(const void* input) {
  if (used_ == kGraphSlots) {
    if (!full_reported_) {
      TPCOMM_LOG(kWarn, "custom",
                 "more than {} captured calls: later ones copy through the workspace even after "
                 "register_graph_buffers",
                 kGraphSlots);
      full_reported_ = true;
    }
    return nullptr;
  }
  pending_.emplace_back(used_, input);
  return slots_ + kSlotWords * used_++;
}

std::size_t GraphBuffers::register_all(Bootstrap& bootstrap, int listener, std::uint64_t channel,
                                       const Deadline& deadline) {
  const int world = bootstrap.size();
  const int me = bootstrap.rank();
  // Every rank must have captured the same calls: same number of buffers.
  const std::vector<std::uint64_t> mine_count{pending_.size()};
  auto counts = bootstrap.all_gather(as_bytes(mine_count), "graph buffer count", deadline);
  for (int r = 0; r < world; ++r) {
    const auto n = from_bytes<std::uint64_t>(counts[static_cast<std::size_t>(r)], 1, r)[0];
    if (n != pending_.size()) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("rank {} captured {} calls with buffers to register since the last "
                              "registration, rank {} captured {}: every rank must capture the "
                              "same calls",
                              r, n, me, pending_.size()));
    }
  }
  const std::size_t n = pending_.size();
  std::vector<SharedBuffer> shared(n);
  std::vector<std::string> why(n);
  std::vector<net::Fd> fds(n);
  for (std::size_t i = 0; i < n; ++i) shared[i] = describe(pending_[i].second, &fds[i], &why[i]);
  auto all = bootstrap.all_gather(as_bytes(shared), "graph buffer handles", deadline);
  std::vector<std::vector<SharedBuffer>> peers;
  for (int r = 0; r < world; ++r) {
    peers.push_back(from_bytes<SharedBuffer>(all[static_cast<std::size_t>(r)], n, r));
  }

  // Open what every rank could share the same way; a buffer this rank cannot open stays copied
  // everywhere (the vote below).
  std::vector<std::vector<std::uint64_t>> words(n, std::vector<std::uint64_t>(kSlotWords, 0));
  std::vector<std::uint8_t> usable(n, 1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t how = peers[0][i].how;
    for (int r = 0; r < world; ++r) {
      const std::uint32_t theirs = peers[static_cast<std::size_t>(r)][i].how;
      if (theirs == kNone || theirs != how) {
        if (why[i].empty()) {
          why[i] = theirs == kNone ? fmt::format("rank {} could not share it", r)
                                   : "the ranks' buffers come from different allocators";
        }
        usable[i] = 0;
      }
    }
    // Descriptors travel all-to-all, so every rank takes part whenever every rank has one.
    std::vector<net::Fd> received;
    if (usable[i] && how == kVmmFd) {
      if (listener < 0) {
        usable[i] = 0;
        why[i] = "VMM buffers are shared only within a node";
      } else {
        received =
            exchange_handles(me, world, channel, listener, fds[i].get(), shared[i].size, deadline);
      }
    }
    for (int r = 0; r < world && usable[i]; ++r) {
      const SharedBuffer& s = peers[static_cast<std::size_t>(r)][i];
      if (r == me || s.pid == static_cast<std::int32_t>(getpid())) {
        words[i][1 + static_cast<std::size_t>(r)] = s.address;
        continue;
      }
      try {
        void* base = how == kIpcHandle ? open_ipc(s.handle)
                                       : open_vmm(r, s.address - s.offset, s.size,
                                                  received[static_cast<std::size_t>(r)].get());
        words[i][1 + static_cast<std::size_t>(r)] =
            reinterpret_cast<std::uintptr_t>(base) + s.offset;
      } catch (const std::exception& e) {
        why[i] = fmt::format("cannot open rank {}'s buffer: {}", r, e.what());
        usable[i] = 0;
      }
    }
  }
  auto votes = bootstrap.all_gather(as_bytes(usable), "graph buffer vote", deadline);
  for (int r = 0; r < world; ++r) {
    const auto theirs = from_bytes<std::uint8_t>(votes[static_cast<std::size_t>(r)], n, r);
    for (std::size_t i = 0; i < n; ++i) {
      if (theirs[i] == 0 && usable[i]) {
        usable[i] = 0;
        why[i] = fmt::format("rank {} could not open a peer's buffer", r);
      }
    }
  }
  std::size_t registered = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!usable[i]) {
      TPCOMM_LOG(kInfo, "custom", "rank {}: captured buffer {} keeps copying: {}", me, i, why[i]);
      continue;
    }
    words[i][0] = 1;
    check_cuda(cudaMemcpy(slots_ + kSlotWords * pending_[i].first, words[i].data(),
                          kSlotWords * sizeof(std::uint64_t), cudaMemcpyHostToDevice),
               "writing a graph buffer slot");
    ++registered;
  }
  pending_.clear();
  return registered;
}

}  // namespace tpcomm::transport::cuda
