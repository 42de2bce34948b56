// Registered (symmetric) host buffers: Communicator::allocate hands out memory of a POSIX
// shared-memory segment of its own, mapped by every rank of the node, so that the shm backend
// reads a peer's input where it lies instead of a copy of it in the peer's lane
// (docs/registered.md).
//
// allocate and free are collective: every rank calls them in the same order with the same size,
// so the n-th allocation has the same id on every rank, and no rank can unmap a buffer a peer
// still names. A call names its input to the peers by (id, offset) in its lane header.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "shm_segment.hpp"
#include "tpcomm/bootstrap.hpp"

namespace tpcomm::transport::shm {

// A position in a registered buffer, packed for the lane header: id << 48 | offset; 0 = none.
struct RegisteredAt {
  std::uint32_t id = 0;  // 1, 2, ... in allocation order; 0: not registered
  std::uint64_t offset = 0;
  std::uint64_t packed() const { return id == 0 ? 0 : (std::uint64_t{id} << 48) | offset; }
  static RegisteredAt unpack(std::uint64_t v) { return {std::uint32_t(v >> 48), v & kOffsetMask}; }
  static constexpr std::uint64_t kOffsetMask = (std::uint64_t{1} << 48) - 1;
  static constexpr std::uint32_t kMaxId = 0x7fff;  // bit 63 of the packed form is not ours
};

class RegisteredHeap {
 public:
  RegisteredHeap(int rank, int size, std::uint64_t comm_id);
  ~RegisteredHeap();
  RegisteredHeap(const RegisteredHeap&) = delete;
  RegisteredHeap& operator=(const RegisteredHeap&) = delete;

  // Whether peers map each allocation (every rank on this node, with the shm backend set up).
  // Decided once after set-up, the same on every rank; without it allocations are private.
  void share_with_peers(bool shared) { shared_ = shared; }

  // Collective: every rank's segment of `bytes` (page-rounded), created, exchanged and mapped by
  // every rank; a failure on any rank fails it on every rank, naming that rank.
  void* allocate(std::size_t bytes, Bootstrap& bootstrap, const Deadline& deadline);
  // Collective: unmaps the allocation at `p` (this rank's pointer) everywhere. No call of this
  // communicator runs meanwhile: the communicator serves its calls, free included, one at a
  // time (runtime/call_queue.hpp).
  void free(void* p, Bootstrap& bootstrap, const Deadline& deadline);

  // Keeps this rank's mapping of the allocation at `p` (allocate's pointer) alive while the
  // handle lives, after free() and the heap's end too (for arrays of a language binding that
  // outlive both). Throws kInvalidInput for any other pointer.
  std::shared_ptr<void> keep_mapped(void* p) const;

  // Where [p, p + bytes) of this rank lies, if inside one allocation.
  RegisteredAt find(const void* p, std::size_t bytes) const;
  // Rank r's memory at `at`, `bytes` long; throws kMismatch if it is not in an allocation
  // mapped here (a peer named a buffer this rank freed, or out of bounds).
  const std::uint8_t* peer(int r, RegisteredAt at, std::size_t bytes) const;

 private:
  struct Allocation {
    std::size_t bytes = 0;
    // By rank; only this rank's when private. Shared: keep_mapped's handles hold this rank's.
    std::vector<std::shared_ptr<Segment>> mapped;
  };
  std::uint8_t* base_of(const Allocation& a, int r) const;

  int rank_;
  int size_;
  std::uint64_t comm_id_;
  bool shared_ = false;
  mutable std::mutex mutex_;
  std::map<std::uint32_t, Allocation> allocations_;  // by id
  std::uint32_t next_id_ = 1;
  std::uint64_t ops_ = 0;  // allocate and free calls so far (the same on every rank): vote keys
};

}  // namespace tpcomm::transport::shm
