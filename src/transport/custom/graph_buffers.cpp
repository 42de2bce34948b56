// Registration of captured calls' input buffers (graph_buffers.hpp).
#include "graph_buffers.hpp"
#include "peer_reach.hpp"
#include "registration_fence.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "shared_buffer.hpp"
#include "tpcomm/error.hpp"
#include "transport/cuda/driver_api.hpp"
#include "transport/cuda/fd_channel.hpp"

namespace tpcomm::transport::cuda {
namespace {

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

// One registration round (declared in the header, so not in the anonymous namespace): what every
// rank shares of each pending buffer, and what becomes of it.
struct RegistrationRound {
  std::uint32_t tag = 0;                          // the registration's number
  Descriptions mine;                              // this rank's, with its VMM descriptors
  std::vector<std::vector<SharedBuffer>> peers;   // [rank][buffer]
  std::vector<std::string> why;                   // why buffer i keeps copying
  std::vector<std::uint8_t> usable;               // 1: every rank could open it so far
  std::vector<std::vector<std::uint64_t>> words;  // each buffer's slot: flag, then addresses
  std::vector<std::vector<std::uint32_t>> sent;   // [rank]: the allocations it sends, ascending
  std::vector<HandleSet> received;                // [rank]: their descriptors, as `sent` orders
};

namespace {

// Phase 1: every rank must have captured the same calls, so the same number of buffers.
void require_same_count(Bootstrap& bootstrap, std::size_t n, const Deadline& deadline) {
  const std::vector<std::uint64_t> mine{n};
  auto counts = bootstrap.all_gather(as_bytes(mine), "graph buffer count", deadline);
  for (int r = 0; r < bootstrap.size(); ++r) {
    const auto theirs = from_bytes<std::uint64_t>(counts[static_cast<std::size_t>(r)], 1, r)[0];
    if (theirs != n) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("rank {} captured {} calls with buffers to register since the last "
                              "registration, rank {} captured {}: every rank must capture the "
                              "same calls",
                              r, theirs, bootstrap.rank(), n));
    }
  }
}

// Phase 2: every rank describes how it can share each buffer; all descriptions are gathered.
RegistrationRound exchange_descriptions(
    Bootstrap& bootstrap, const std::vector<std::pair<const void*, std::size_t>>& inputs,
    const Deadline& deadline) {
  const std::size_t n = inputs.size();
  RegistrationRound round;
  round.mine = describe_all(inputs);
  round.why = round.mine.why;
  round.usable.assign(n, 1);
  round.words.assign(n, std::vector<std::uint64_t>(kSlotWords, 0));
  auto all = bootstrap.all_gather(as_bytes(round.mine.buffers), "graph buffer handles", deadline);
  for (int r = 0; r < bootstrap.size(); ++r) {
    round.peers.push_back(from_bytes<SharedBuffer>(all[static_cast<std::size_t>(r)], n, r));
  }
  return round;
}

// Whether every rank shared buffer i, and the same way; marks it unusable with the reason if not.
void require_shared_alike(RegistrationRound& round, std::size_t i) {
  const std::uint32_t how = round.peers[0][i].how;
  for (std::size_t r = 0; r < round.peers.size(); ++r) {
    const std::uint32_t theirs = round.peers[r][i].how;
    if (theirs != kNone && theirs == how) continue;
    if (round.why[i].empty()) {
      round.why[i] = theirs == kNone ? fmt::format("rank {} could not share it", r)
                                     : "the ranks' buffers come from different allocators";
    }
    round.usable[i] = 0;
  }
}

// Phase 5: a buffer any rank could not open stays copied everywhere.
void vote_on_usable(Bootstrap& bootstrap, RegistrationRound& round, const Deadline& deadline) {
  const std::size_t n = round.usable.size();
  auto votes = bootstrap.all_gather(as_bytes(round.usable), "graph buffer vote", deadline);
  for (int r = 0; r < bootstrap.size(); ++r) {
    const auto theirs = from_bytes<std::uint8_t>(votes[static_cast<std::size_t>(r)], n, r);
    for (std::size_t i = 0; i < n; ++i) {
      if (theirs[i] == 0 && round.usable[i]) {
        round.usable[i] = 0;
        round.why[i] = fmt::format("rank {} could not open a peer's buffer", r);
      }
    }
  }
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

void* GraphBuffers::open_vmm(const VmmImportKey& key, std::size_t bytes, int fd) {
  auto it = vmm_opened_.find(key);
  if (it != vmm_opened_.end()) return it->second;
  return vmm_opened_.emplace(key, vmm_peers_.map_peer(fd, bytes)).first->second;
}

// A peer's VMM buffer: the descriptor of its allocation in this round, imported once per round
// (docs/gpu-graphs.md, "Registering graph buffers in VMM memory": the peer's address is no key, its
// allocator may have remapped it since).
void* GraphBuffers::open_peer_vmm(const RegistrationRound& round, int r, const SharedBuffer& s) {
  const auto rank = static_cast<std::size_t>(r);
  const std::size_t k = position_in(round.sent[rank], s.allocation);
  const HandleSet& theirs = round.received[rank];
  if (theirs.sizes[k] != s.size) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("its descriptor maps {} bytes, its description says {}",
                            theirs.sizes[k], s.size));
  }
  return open_vmm(vmm_import_key(r, round.tag, s.address - s.offset, s.allocation), s.size,
                  theirs.fds[k].get());
}

GraphBuffers::~GraphBuffers() {
  for (auto& [key, base] : opened_) cudaIpcCloseMemHandle(base);
  if (slots_ != nullptr) cudaFree(slots_);
  if (staging_ != nullptr) cudaFreeHost(staging_);
}

void GraphBuffers::create(int device, std::size_t slots) {
  device_ = device;
  vmm_peers_.use_device(device);
  capacity_ = slots;
  const std::size_t bytes = capacity_ * kSlotWords * sizeof(std::uint64_t);
  void* staging = nullptr;
  check_cuda(cudaHostAlloc(&staging, kSlotWords * sizeof(std::uint64_t), cudaHostAllocDefault),
             "cudaHostAlloc (graph slot staging)");
  staging_ = static_cast<std::uint64_t*>(staging);
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), "cudaMalloc (graph buffer slots)");
  slots_ = static_cast<std::uint64_t*>(p);
  check_cuda(cudaMemset(slots_, 0, bytes), "cudaMemset (graph buffer slots)");
}

const std::uint64_t* GraphBuffers::claim(const void* input, std::size_t bytes) {
  if (used_ == capacity_) {
    if (!full_reported_) {
      TPCOMM_LOG(kWarn, "custom",
                 "more than {} captured calls: later ones copy through the workspace even after "
                 "register_graph_buffers (raise TPCOMM_GRAPH_SLOTS)",
                 capacity_);
      full_reported_ = true;
    }
    return nullptr;
  }
  pending_.push_back({used_, input, bytes});
  return slots_ + kSlotWords * used_++;
}

// Phase 3: the VMM descriptors of every buffer that every rank shares that way travel as one set
// per pair of ranks and round (a fast rank's next round can never be taken for this one): one
// descriptor per allocation, in as many messages as the set needs.
void GraphBuffers::exchange_vmm(RegistrationRound& round, Bootstrap& bootstrap, int listener,
                                const FdChannelAuth& auth, const Deadline& deadline) {
  std::vector<std::size_t> vmm;
  for (std::size_t i = 0; i < round.usable.size(); ++i) {
    require_shared_alike(round, i);
    if (round.usable[i] && round.peers[0][i].how == kVmmFd) vmm.push_back(i);
  }
  const auto world = static_cast<std::size_t>(bootstrap.size());
  const auto me = static_cast<std::size_t>(bootstrap.rank());
  round.received.resize(world);
  if (vmm.empty()) return;
  if (listener < 0) {
    for (std::size_t i : vmm) {
      round.usable[i] = 0;
      round.why[i] = "VMM buffers are shared only within a node";
    }
    return;
  }
  // What each rank sends follows from the gathered descriptions, so every rank knows which
  // allocation the k-th descriptor of a peer is.
  for (std::size_t r = 0; r < world; ++r) {
    std::vector<std::uint32_t> used;
    for (std::size_t i : vmm) used.push_back(round.peers[r][i].allocation);
    round.sent.push_back(allocations_to_send(used));
  }
  std::vector<int> fds;
  std::vector<std::uint64_t> sizes;
  for (std::uint32_t a : round.sent[me]) {
    fds.push_back(round.mine.exported[a].get());
    sizes.push_back(round.mine.allocations[a].size);
  }
  round.received = exchange_handle_sets(auth, round.tag, listener, mailbox_, fds, sizes, deadline);
  round.mine.exported.clear();  // sent: each peer holds its own copy now
  for (std::size_t r = 0; r < world; ++r) {
    if (r != me && round.received[r].fds.size() != round.sent[r].size()) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("register_graph_buffers: rank {} sent {} VMM descriptors, its "
                              "buffers name {} allocations",
                              r, round.received[r].fds.size(), round.sent[r].size()));
    }
  }
}

// Whether this GPU can read `address` directly: yes on the same device unless it is VMM memory
// this device was not granted; on another device of this process after enabling peer access
// (refused, with the reason, where the devices cannot, or where a VMM buffer's owner did not
// grant this device access: peer_reach.hpp). `vmm`: the buffer is a VMM mapping, as its
// description found (cuMemRetainAllocationHandle); only then is cuMemGetAccess asked, since
// for cudaMalloc memory its answer is not "no VMM access" on every driver.
bool GraphBuffers::peer_access_to(const void* address, bool vmm, std::string* why) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, address) != cudaSuccess) {
    cudaGetLastError();
    *why = fmt::format("cannot tell which GPU holds {}", address);
    return false;
  }
  PeerBufferFacts f;
  f.reader_device = device_;
  f.owner_device = attr.device;
  int can = 0;
  if (attr.device != device_ &&
      cudaDeviceCanAccessPeer(&can, device_, attr.device) == cudaSuccess) {
    f.can_access_peer = can != 0;
  }
  cudaGetLastError();
  CUmemLocation here{};
  here.type = CU_MEM_LOCATION_TYPE_DEVICE;
  here.id = device_;
  unsigned long long flags = 0;
  const DriverApi& api = driver_api();
  if (vmm && api.mem_get_access != nullptr &&
      api.mem_get_access(&flags, &here, reinterpret_cast<CUdeviceptr>(address)) == CUDA_SUCCESS) {
    f.vmm_access = flags;
  }
  if (std::string refusal = peer_read_refusal(f); !refusal.empty()) {
    *why = std::move(refusal);
    return false;
  }
  if (attr.device == device_) return true;
  const cudaError_t e = cudaDeviceEnablePeerAccess(attr.device, 0);
  if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
    *why = fmt::format("cudaDeviceEnablePeerAccess({} -> {}) failed: {}", device_, attr.device,
                       cudaGetErrorString(e));
    cudaGetLastError();
    return false;
  }
  cudaGetLastError();  // "already enabled" is sticky otherwise
  return true;
}

// Phase 4: maps every peer's copy of buffer i.
void GraphBuffers::open_peers(RegistrationRound& round, std::size_t i, int me) {
  const int world = static_cast<int>(round.peers.size());
  const std::uint32_t how = round.peers[0][i].how;
  for (int r = 0; r < world && round.usable[i]; ++r) {
    const SharedBuffer& s = round.peers[static_cast<std::size_t>(r)][i];
    auto& word = round.words[i][1 + static_cast<std::size_t>(r)];
    if (r == me || s.process == this_process()) {
      // A thread of this process: its address as is, once this GPU may read the one it is on.
      if (r != me &&
          !peer_access_to(reinterpret_cast<const void*>(s.address), how == kVmmFd, &round.why[i])) {
        round.usable[i] = 0;
        break;
      }
      word = s.address;
      continue;
    }
    try {
      void* base = how == kIpcHandle ? open_ipc(s.handle) : open_peer_vmm(round, r, s);
      word = reinterpret_cast<std::uintptr_t>(base) + s.offset;
    } catch (const std::exception& e) {
      round.why[i] = fmt::format("cannot open rank {}'s buffer: {}", r, e.what());
      round.usable[i] = 0;
    }
  }
}

// Phase 6: the slots of the buffers every rank opened switch to reading in place.
std::size_t GraphBuffers::write_slots(RegistrationRound& round, int me) {
  std::size_t registered = 0;
  for (std::size_t i = 0; i < round.usable.size(); ++i) {
    if (!round.usable[i]) {
      TPCOMM_LOG(kInfo, "custom", "rank {}: captured buffer {} keeps copying: {}", me, i,
                 round.why[i]);
      continue;
    }
    round.words[i][0] = 1;
    // From pinned memory, finished before returning: a replay launched after
    // register_graph_buffers() returns, on any stream, sees the slot (a pageable copy may return
    // before the device has the bytes).
    std::copy(round.words[i].begin(), round.words[i].end(), staging_);
    check_cuda(cudaMemcpyAsync(slots_ + kSlotWords * pending_[i].slot, staging_,
                               kSlotWords * sizeof(std::uint64_t), cudaMemcpyHostToDevice,
                               cudaStreamPerThread),
               "writing a graph buffer slot");
    check_cuda(cudaStreamSynchronize(cudaStreamPerThread), "writing a graph buffer slot");
    ++registered;
  }
  return registered;
}

std::size_t GraphBuffers::register_all(Bootstrap& bootstrap, int listener,
                                       const FdChannelAuth& auth, const Deadline& deadline) {
  // The device drain is bounded by the kernels' own wait budget (a queued replay whose peer
  // never comes gives up at TPCOMM_KERNEL_TIMEOUT_MS).
  return register_between_barriers(
      bootstrap, deadline,
      [&] {
        check_cuda(cudaDeviceSynchronize(),
                   "waiting for the replays queued before register_graph_buffers()");
      },
      [&] { return register_round(bootstrap, listener, auth, deadline); });
}

std::size_t GraphBuffers::register_round(Bootstrap& bootstrap, int listener,
                                         const FdChannelAuth& auth, const Deadline& deadline) {
  require_same_count(bootstrap, pending_.size(), deadline);
  std::vector<std::pair<const void*, std::size_t>> inputs;
  for (const auto& p : pending_) inputs.emplace_back(p.input, p.bytes);
  RegistrationRound round = exchange_descriptions(bootstrap, inputs, deadline);
  round.tag = registrations_++;
  exchange_vmm(round, bootstrap, listener, auth, deadline);
  for (std::size_t i = 0; i < inputs.size(); ++i) open_peers(round, i, bootstrap.rank());
  vote_on_usable(bootstrap, round, deadline);
  const std::size_t registered = write_slots(round, bootstrap.rank());
  pending_.clear();
  return registered;
}

}  // namespace tpcomm::transport::cuda
