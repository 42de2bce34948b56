// broadcast, barrier and split: the calls built from the collectives and the bootstrap rather
// than run by a backend of their own.
#include <algorithm>
#include <cstring>
#include <tuple>

#include <fmt/format.h>

#include "call_checks.hpp"
#include "common/log_format.hpp"
#include "common/rank_list.hpp"
#include "communicator_state.hpp"
#include "dispatch.hpp"

namespace tpcomm {
namespace {

using runtime::CommunicatorState;

// Each rank's share of one all_gather of a broadcast: large enough that a call's fixed cost does
// not matter, small enough that the staging buffer (size() of them) stays a few MiB.
constexpr std::size_t kBroadcastChunkBytes = 1 << 20;

// Keeps the parent's bootstrap, and so the store its rank 0 may serve, alive as long as a
// sub-communicator made by split() needs it.
class SplitBootstrap final : public Bootstrap {
 public:
  SplitBootstrap(std::shared_ptr<Bootstrap> parent, std::shared_ptr<Bootstrap> inner)
      : parent_(std::move(parent)), inner_(std::move(inner)) {}
  ~SplitBootstrap() override { inner_.reset(); }  // before the parent (and its store) goes
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::shared_ptr<Store> store() const override { return inner_->store(); }
  std::vector<Bytes> all_gather(const Bytes& mine, std::string_view what,
                                const Deadline& deadline) override {
    return inner_->all_gather(mine, what, deadline);
  }

 private:
  std::shared_ptr<Bootstrap> parent_;
  std::shared_ptr<Bootstrap> inner_;
};

Bytes text_bytes(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

// With TPCOMM_CHECK=1, ranks that disagree on the root (which the all_gather calls cannot see)
// fail with kMismatch naming both sides.
void check_broadcast(CommunicatorState& c, std::size_t count, DataType type, int root) {
  if (!c.check_calls) return;
  const std::string mine = fmt::format("broadcast({} x {}, root {})", count, to_string(type), root);
  auto all = c.bootstrap->all_gather(text_bytes(mine), "broadcast check", c.deadline());
  std::map<std::string, std::vector<int>> by_call;
  for (std::size_t r = 0; r < all.size(); ++r)
    by_call[std::string(all[r].begin(), all[r].end())].push_back(static_cast<int>(r));
  if (by_call.size() == 1) return;
  std::vector<std::string> sides;
  for (const auto& [call, ranks] : by_call)
    sides.push_back(fmt::format("{} called {}", common::rank_set_text(ranks), call));
  Error e(ErrorCode::kMismatch, fmt::format("rank {}: the broadcast does not match across ranks "
                                            "(TPCOMM_CHECK=1): {}",
                                            c.bootstrap->rank(), fmt::join(sides, "; ")));
  c.group_abort.abort_with(e);
  throw e;
}

void check_root(const CommunicatorState& c, int root, const char* call) {
  if (root < 0 || root >= c.bootstrap->size()) {
    throw invalid_input(fmt::format("rank {}: {}: root {} is not a rank of this group of {}",
                                    c.bootstrap->rank(), call, root, c.bootstrap->size()));
  }
}

// Elements of one all_gather of a broadcast.
std::size_t broadcast_chunk(DataType type) {
  return std::max<std::size_t>(1, kBroadcastChunkBytes / size_of(type));
}

// The loop both overloads share: each chunk is all-gathered into `staging` (`gather`), and every
// rank but the root takes the root's part from it (`copy(dst, src, bytes)`).
template <typename Gather, typename Copy>
void broadcast_in_chunks(void* buffer, std::size_t count, DataType type, int rank, int root,
                         std::byte* staging, Gather gather, Copy copy) {
  const std::size_t elem = size_of(type);
  const std::size_t chunk = broadcast_chunk(type);
  auto* bytes = static_cast<std::byte*>(buffer);
  for (std::size_t done = 0; done < count; done += chunk) {
    const std::size_t part = std::min(chunk, count - done);
    gather(bytes + done * elem, staging, part);
    if (rank != root) {
      copy(bytes + done * elem, staging + static_cast<std::size_t>(root) * part * elem,
           part * elem);
    }
  }
}

// While it lives, the all_gather calls of a broadcast count as that broadcast (stats()).
class CountedAsBroadcast {
 public:
  explicit CountedAsBroadcast(CommunicatorState& c) : c_(c) { c_.broadcast_chunks = 0; }
  ~CountedAsBroadcast() { c_.broadcast_chunks = -1; }
  CountedAsBroadcast(const CountedAsBroadcast&) = delete;
  CountedAsBroadcast& operator=(const CountedAsBroadcast&) = delete;

 private:
  CommunicatorState& c_;
};

// All of broadcast's checks; the bytes of its staging buffer.
std::size_t prepare_broadcast(CommunicatorState& c, void* buffer, std::size_t count, DataType type,
                              int root) {
  c.group_abort.throw_if_aborted();
  check_root(c, root, "broadcast");
  c.refuse_unusable_buffers(
      [&] { runtime::check_broadcast_buffer(buffer, count, type, c.bootstrap->rank()); });
  check_broadcast(c, count, type, root);
  return std::min(count, broadcast_chunk(type)) * size_of(type) *
         static_cast<std::size_t>(c.bootstrap->size());
}

}  // namespace

void Communicator::broadcast(void* buffer, std::size_t count, DataType type, int root) {
  impl_->gate.run("broadcast", [&] {
    const std::size_t need = prepare_broadcast(*impl_, buffer, count, type, root);
    const CountedAsBroadcast counted(*impl_);
    if (impl_->host_scratch.size() < need) impl_->host_scratch.resize(need);
    broadcast_in_chunks(
        buffer, count, type, rank(), root, impl_->host_scratch.data(),
        [&](const void* in, void* out, std::size_t n) { all_gather(in, out, n, type); },
        [](void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); });
  });
}

void Communicator::broadcast(void* buffer, std::size_t count, DataType type, int root,
                             CudaStream stream) {
  impl_->gate.run("broadcast", [&] {
    const std::size_t need = prepare_broadcast(*impl_, buffer, count, type, root);
    if (impl_->plan.device_type != DeviceType::kCuda) {  // before the staging buffer is made
      throw invalid_input(
          fmt::format("rank {}: broadcast called with a stream on a {} "
                      "communicator (create it with CommunicatorOptions::device "
                      "= kCuda for device buffers)",
                      rank(), to_string(impl_->plan.device_type)));
    }
    auto* scratch = static_cast<std::byte*>(impl_->device_scratch.get(
        need, runtime::stream_is_capturing(stream),
        fmt::format("rank {}: broadcast({} x {})", rank(), to_string(type), count)));
    const CountedAsBroadcast counted(*impl_);
    broadcast_in_chunks(
        buffer, count, type, rank(), root, scratch,
        [&](const void* in, void* out, std::size_t n) { all_gather(in, out, n, type, stream); },
        [&](void* dst, const void* src, std::size_t bytes) {
          runtime::device_copy_async(dst, src, bytes, stream);
        });
  });
}

void Communicator::barrier() {
  if (impl_->plan.device_type != DeviceType::kCuda) {
    // One all-reduce of one int32 on the plan's route (shm, Gloo or hier): no rank can hold the
    // sum before every rank gave its part, so none returns before all have come, and it costs
    // one small call where the store's barrier took a dozen store round trips. The flag keeps it
    // apart from a user's all-reduce of one int32 in the backends' cross-rank comparison.
    impl_->gate.run("barrier", [&] {
      const std::int32_t one = 1;
      std::int32_t arrived = 0;
      runtime::run_call(*impl_,
                        {.op = Op::kAllReduce,
                         .input = &one,
                         .output = &arrived,
                         .count = 1,
                         .type = DataType::kInt32,
                         .reduce = ReduceOp::kSum,
                         .barrier = true},
                        false);
      if (arrived != size()) {
        const Error wrong(ErrorCode::kInternal,
                          fmt::format("rank {}: barrier #{} counted {} ranks of {}", rank(),
                                      impl_->sequence, arrived, size()));
        impl_->group_abort.abort_with(wrong);
        throw wrong;
      }
    });
    return;
  }
  // A kCuda communicator's calls take device buffers and streams: its barrier, host-side, goes
  // through the bootstrap.
  impl_->gate.run("barrier", [&] {
    impl_->group_abort.throw_if_aborted();
    const std::uint64_t call = ++impl_->sequence;
    try {
      impl_->bootstrap->barrier(fmt::format("barrier #{}", call), impl_->deadline());
      impl_->counters.add(Collective::kBarrier, std::nullopt, std::nullopt, 1, 0);
    } catch (const Error& e) {
      Error full(e.code(), fmt::format("rank {}: barrier #{} failed: {}{}", rank(), call, e.what(),
                                       impl_->group_abort.peer_report(
                                           e.code() == ErrorCode::kTimeout, call)));
      TPCOMM_LOG(kError, "comm", "{}", full.what());
      impl_->group_abort.abort_with(full);
      throw full;
    }
  });
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  return impl_->gate.run("split", [&]() -> std::unique_ptr<Communicator> {
    impl_->group_abort.throw_if_aborted();
    const std::uint64_t index = ++impl_->splits;
    const std::string mine = fmt::format("{} {}", color, key);
    std::vector<Bytes> all;
    try {
      all = impl_->bootstrap->all_gather(text_bytes(mine), fmt::format("split #{}", index),
                                         impl_->deadline());
    } catch (const Error& e) {
      Error full(e.code(), fmt::format("rank {}: split #{} failed: {}{}", rank(), index, e.what(),
                                       impl_->group_abort.peer_report()));
      impl_->group_abort.abort_with(full);
      throw full;
    }
    if (color < 0) return nullptr;
    // The members of this color, ordered by (key, parent rank).
    std::vector<std::tuple<int, int>> members;
    for (int r = 0; r < size(); ++r) {
      const std::string theirs(all[r].begin(), all[r].end());
      int c = 0;
      int k = 0;
      if (std::sscanf(theirs.c_str(), "%d %d", &c, &k) != 2) {
        throw Error(ErrorCode::kInternal, fmt::format("split: rank {} sent '{}'", r, theirs));
      }
      if (c == color) members.emplace_back(k, r);
    }
    std::sort(members.begin(), members.end());
    const auto me = std::find(members.begin(), members.end(), std::make_tuple(key, rank()));
    const int sub_rank = static_cast<int>(me - members.begin());
    auto inner = make_store_bootstrap(
        impl_->bootstrap->store(), sub_rank, static_cast<int>(members.size()),
        fmt::format("tpcomm/c{:016x}/split{}/{}", impl_->comm_id, index, color));
    auto sub = std::make_shared<SplitBootstrap>(impl_->bootstrap, std::move(inner));
    TPCOMM_LOG(kInfo, "comm", "rank {}: split #{} color {}: rank {} of {}", rank(), index, color,
               sub_rank, members.size());
    return runtime::create_communicator(std::move(sub), impl_->options, *impl_->platform);
  });
}

}  // namespace tpcomm
