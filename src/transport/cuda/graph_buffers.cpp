// Registration of captured calls' input buffers (graph_buffers.hpp).
#include "graph_buffers.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "driver_api.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/log.hpp"

namespace tpcomm::transport::cuda {
namespace {

// What a rank tells its peers about one buffer.
struct SharedBuffer {
  std::uint32_t ok;       // 1: the handle below is valid
  std::int32_t pid;       // peers in the same process use `address` as is
  std::uint64_t address;  // the input's address in this process
  std::uint64_t offset;   // from the start of its allocation (what the handle maps)
  cudaIpcMemHandle_t handle;
};
static_assert(sizeof(cudaIpcMemHandle_t) == 64 && sizeof(SharedBuffer) == 88);

// How this rank can share `input`, or why not (ok == 0).
SharedBuffer describe(const void* input, std::string* why) {
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
  const cudaError_t e = cudaIpcGetMemHandle(&s.handle, reinterpret_cast<void*>(base));
  if (e != cudaSuccess) {
    cudaGetLastError();
    // VMM allocations (PyTorch's expandable segments) have no legacy IPC handle.
    *why = fmt::format("no IPC handle for the allocation at {:#x}: {}",
                       static_cast<std::uint64_t>(base), cudaGetErrorString(e));
    return s;
  }
  s.ok = 1;
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

GraphBuffers::~GraphBuffers() {
  for (auto& [key, base] : opened_) cudaIpcCloseMemHandle(base);
  if (slots_ != nullptr) cudaFree(slots_);
}

void GraphBuffers::create() {
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

std::size_t GraphBuffers::register_all(Bootstrap& bootstrap, const Deadline& deadline) {
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
  for (std::size_t i = 0; i < n; ++i) shared[i] = describe(pending_[i].second, &why[i]);
  auto all = bootstrap.all_gather(as_bytes(shared), "graph buffer handles", deadline);
  std::vector<std::vector<SharedBuffer>> peers;
  for (int r = 0; r < world; ++r) {
    peers.push_back(from_bytes<SharedBuffer>(all[static_cast<std::size_t>(r)], n, r));
  }

  // Open what every rank could share; a buffer this rank cannot open stays copied everywhere.
  std::vector<std::vector<std::uint64_t>> words(n, std::vector<std::uint64_t>(kSlotWords, 0));
  std::vector<std::uint8_t> usable(n, 1);
  for (std::size_t i = 0; i < n; ++i) {
    for (int r = 0; r < world && usable[i]; ++r) {
      const SharedBuffer& s = peers[static_cast<std::size_t>(r)][i];
      if (s.ok == 0 && why[i].empty()) why[i] = fmt::format("rank {} could not share it", r);
      if (s.ok == 0) {
        usable[i] = 0;
        break;
      }
      if (r == me || s.pid == static_cast<std::int32_t>(getpid())) {
        words[i][1 + static_cast<std::size_t>(r)] = s.address;
        continue;
      }
      const std::string key(reinterpret_cast<const char*>(&s.handle), sizeof(s.handle));
      auto it = opened_.find(key);
      if (it == opened_.end()) {
        void* base = nullptr;
        const cudaError_t e = cudaIpcOpenMemHandle(&base, s.handle, cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
          cudaGetLastError();
          why[i] = fmt::format("cannot open rank {}'s IPC handle: {}", r, cudaGetErrorString(e));
          usable[i] = 0;
          break;
        }
        it = opened_.emplace(key, base).first;
      }
      words[i][1 + static_cast<std::size_t>(r)] =
          reinterpret_cast<std::uintptr_t>(it->second) + s.offset;
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
