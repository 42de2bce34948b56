// Registered host buffers: one segment per rank per allocation, exchanged and mapped in two
// votes (all_gather of "ok ..." or "error ..."), so that a failure anywhere fails everywhere.
#include "shm_registered_heap.hpp"

#include <unistd.h>

#include <random>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "common/bytes_text.hpp"
#include "common/segment_names.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::shm {
namespace {

// Every rank's vote: "ok ..." or "error <why>". Throws the first rank's error on every rank
// (kInvalidInput when this rank's own argument was wrong, else kUnavailable naming the rank).
std::vector<std::string> vote(Bootstrap& bs, const std::string& mine, const std::string& key,
                              const Deadline& deadline, ErrorCode own_code) {
  std::vector<std::string> all;
  for (const Bytes& b : bs.all_gather(common::to_bytes(mine), key, deadline))
    all.push_back(common::to_text(b));
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].rfind("error ", 0) != 0) continue;
    const bool own = static_cast<int>(r) == bs.rank();
    throw Error(own ? own_code : ErrorCode::kUnavailable,
                own ? all[r].substr(6) : fmt::format("rank {}: {}", r, all[r].substr(6)));
  }
  return all;
}

}  // namespace

RegisteredHeap::RegisteredHeap(int rank, int size, std::uint64_t comm_id)
    : rank_(rank), size_(size), comm_id_(comm_id) {}

RegisteredHeap::~RegisteredHeap() = default;

std::uint8_t* RegisteredHeap::base_of(const Allocation& a, int r) const {
  return static_cast<std::uint8_t*>(a.mapped[static_cast<std::size_t>(r)]->base());
}

void* RegisteredHeap::allocate(std::size_t bytes, Bootstrap& bootstrap, const Deadline& deadline) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t rounded = (bytes + page - 1) / page * page;
  const std::uint32_t id = next_id_++;  // the same on every rank: allocations are collective
  const std::string key = fmt::format("registered {:016x} allocate #{}", comm_id_, ++ops_);
  auto own = std::make_shared<Segment>();
  std::string mine;
  ErrorCode code = ErrorCode::kUnavailable;
  try {
    if (bytes == 0 || rounded > RegisteredAt::kOffsetMask) {
      code = ErrorCode::kInvalidInput;
      throw invalid_input(fmt::format("allocate({} bytes): expected 1 byte to 256 TiB", bytes));
    }
    if (id > RegisteredAt::kMaxId) {  // the lane header has 16 bits for it
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("allocate: at most {} allocations per communicator (freed ones "
                              "count too)",
                              RegisteredAt::kMaxId));
    }
    std::random_device rd;
    // All of it this rank's own: its pages on this rank's node, like its slot of the workspace.
    own->create(common::segment_name("buf", fmt::format("{:016x}{:04x}{:08x}", comm_id_, id, rd())),
                rounded, rounded, "the bytes asked of allocate");
    own->populate();
    mine = fmt::format("ok {} {}", bytes, own->name());
  } catch (const Error& e) {
    mine = fmt::format("error {}", e.what());
  }
  const auto posts = vote(bootstrap, mine, key, deadline, code);
  Allocation a;
  a.bytes = rounded;
  a.mapped.resize(static_cast<std::size_t>(size_));
  mine = "ok";
  try {
    for (int r = 0; r < size_; ++r) {
      std::istringstream in(posts[static_cast<std::size_t>(r)].substr(3));
      std::size_t their_bytes = 0;
      std::string name;
      in >> their_bytes >> name;
      if (their_bytes != bytes) {
        throw Error(ErrorCode::kMismatch,
                    fmt::format("allocate is collective with one size: rank {} asked {} bytes, "
                                "rank {} {} bytes",
                                r, their_bytes, rank_, bytes));
      }
      if (r == rank_ || !shared_) continue;
      auto peer = std::make_shared<Segment>();
      peer->open(name, rounded);
      peer->populate();
      a.mapped[static_cast<std::size_t>(r)] = std::move(peer);
    }
  } catch (const Error& e) {
    mine = fmt::format("error {}", e.what());
    code = e.code();
  }
  a.mapped[static_cast<std::size_t>(rank_)] = std::move(own);
  vote(bootstrap, mine, key + " mapped", deadline, code);
  // Every rank has mapped it: the name can go, so no crash can leak the segment.
  a.mapped[static_cast<std::size_t>(rank_)]->unlink();
  std::lock_guard<std::mutex> lock(mutex_);
  void* p = base_of(a, rank_);
  allocations_.emplace(id, std::move(a));
  return p;
}

void RegisteredHeap::free(void* p, Bootstrap& bootstrap, const Deadline& deadline) {
  std::uint32_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [i, a] : allocations_) {
      if (base_of(a, rank_) == p) id = i;
    }
  }
  std::string mine = fmt::format("ok {}", id);
  if (id == 0) {
    mine = fmt::format("error free({}): not a buffer allocate() of this communicator returned", p);
  }
  const auto posts =
      vote(bootstrap, mine, fmt::format("registered {:016x} free #{}", comm_id_, ++ops_), deadline,
           ErrorCode::kInvalidInput);
  for (std::size_t r = 0; r < posts.size(); ++r) {
    if (posts[r] != posts[static_cast<std::size_t>(rank_)]) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("free is collective: rank {} freed allocation #{}, rank {} #{} "
                              "(nothing was freed)",
                              r, posts[r].substr(3), rank_, id));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_.erase(id);
}

std::shared_ptr<void> RegisteredHeap::keep_mapped(void* p) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, a] : allocations_) {
    const auto& own = a.mapped[static_cast<std::size_t>(rank_)];
    if (own->base() == p) return std::shared_ptr<void>(own, p);  // owns the Segment, points at p
  }
  throw invalid_input(
      fmt::format("keep_mapped({}): not a buffer allocate() of this communicator returned", p));
}

RegisteredAt RegisteredHeap::find(const void* p, std::size_t bytes) const {
  if (!shared_ || p == nullptr) return {};
  const auto* q = static_cast<const std::uint8_t*>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, a] : allocations_) {
    const std::uint8_t* base = base_of(a, rank_);
    if (q >= base && q + bytes <= base + a.bytes) {
      return {id, static_cast<std::uint64_t>(q - base)};
    }
  }
  return {};
}

const std::uint8_t* RegisteredHeap::peer(int r, RegisteredAt at, std::size_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocations_.find(at.id);
  if (it == allocations_.end() || !it->second.mapped[static_cast<std::size_t>(r)] ||
      at.offset + bytes > it->second.bytes) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("rank {}'s input is in registered buffer #{} at offset {} ({} bytes), "
                            "which rank {} does not have mapped (freed, or not allocated "
                            "collectively)",
                            r, at.id, at.offset, bytes, rank_));
  }
  return base_of(it->second, r) + at.offset;
}

}  // namespace tpcomm::transport::shm
