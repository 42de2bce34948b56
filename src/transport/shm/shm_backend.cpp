// The shm backend's set-up (the segment in two voted steps, then the single-copy vote), abort, and
// the step protocol every algorithm runs over (shm_collectives.cpp has the algorithms).
#include "shm_backend.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "common/segment_names.hpp"
#include "common/thread_state.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/streaming_copy.hpp"
#include "shm_backend_impl.hpp"
#include "shm_call_text.hpp"
#include "shm_layout.hpp"
#include "shm_registered_heap.hpp"
#include "shm_segment.hpp"
#include "shm_wait.hpp"
#include "tpcomm/error.hpp"
#include "transport/cpu/numa_placement.hpp"
#include "transport/cpu/single_copy.hpp"
#include "transport/cpu/team_ops.hpp"
#include "transport/cpu/team_size.hpp"

namespace tpcomm::transport {
namespace shm {

void ShmBackend::run_setup_step(int step, const Deadline& deadline) {
  const std::size_t world = static_cast<std::size_t>(ctx_.size);
  const std::size_t bytes = segment_bytes(world, ctx_.shm.workspace_bytes);
  const std::string hint =
      fmt::format("TPCOMM_SHM_WORKSPACE (now {} bytes per rank)", ctx_.shm.workspace_bytes);
  if (step == 0) {
    if (ctx_.rank != 0) return;
    std::random_device rd;
    const std::string name =
        common::segment_name("shm", fmt::format("{:016x}{:08x}", ctx_.comm_id, rd()));
    // Rank 0 reserves the header and the ranks' control blocks; each rank its own slot (step 1).
    segment_.create(name, bytes, slots_offset(world), hint);
    auto* h = new (segment_.base()) SegmentHeader();
    h->magic = kMagic;
    h->world_size = static_cast<std::uint32_t>(ctx_.size);
    h->slot_bytes = ctx_.shm.workspace_bytes;
    for (int r = 0; r < ctx_.size; ++r) new (control(r)) RankControl();
    return;
  }
  // Step 1: everyone learns the name from rank 0 and maps the segment.
  const std::string mine = ctx_.rank == 0 ? segment_.name() : std::string();
  Bytes name =
      ctx_.bootstrap->broadcast(Bytes(mine.begin(), mine.end()), 0, "shm segment name", deadline);
  if (ctx_.rank != 0) segment_.open(std::string(name.begin(), name.end()), bytes);
  if (header().magic != kMagic || header().world_size != static_cast<std::uint32_t>(ctx_.size) ||
      header().slot_bytes != ctx_.shm.workspace_bytes) {
    throw Error(ErrorCode::kMismatch,
                "shm: the segment's header does not match this group "
                "(ranks with different TPCOMM_SHM_WORKSPACE?)");
  }
  // This rank's slot, which it writes and the others read, on this rank's NUMA node
  // (shm_segment.hpp); nobody touches it before this step's vote.
  const std::size_t mine_at =
      slots_offset(world) + static_cast<std::size_t>(ctx_.rank) * ctx_.shm.workspace_bytes;
  place_slot(mine_at);
  segment_.reserve(mine_at, ctx_.shm.workspace_bytes, hint);
  // This rank's inbox, which its senders write and it reads (shm_layout.hpp, mailboxes).
  segment_.reserve(
      inbox_offset(world, ctx_.shm.workspace_bytes, static_cast<std::size_t>(ctx_.rank)),
      inbox_bytes(world), hint);
  control(ctx_.rank)->pid.store(getpid(), std::memory_order_release);
  control(ctx_.rank)->tid.store(common::this_thread_id(), std::memory_order_relaxed);
  control(ctx_.rank)->mapped.store(1, std::memory_order_release);
}

void ShmBackend::place_slot(std::size_t offset) {
  // mbind takes whole pages: a page this slot shares with a neighbour's keeps first touch.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t first = (offset + page - 1) / page * page;
  const std::size_t end = (offset + ctx_.shm.workspace_bytes) / page * page;
  if (end <= first) return;
  slot_pages_ = {static_cast<std::uint8_t*>(segment_.base()) + first, end - first};
  const std::string did =
      cpu::bind_pages(slot_pages_.first, slot_pages_.second, cpu::nodes_of_this_rank());
  TPCOMM_LOG(kDebug, "shm", "rank {}: slot {}", ctx_.rank, did);
}

void ShmBackend::log_slot_nodes() const {
  if (!log_enabled(LogLevel::kDebug, "shm") || slot_pages_.first == nullptr) return;
  const std::vector<int> nodes = cpu::nodes_of_pages(slot_pages_.first, slot_pages_.second);
  std::map<int, int> pages;
  for (int n : nodes) ++pages[n];
  std::vector<std::string> parts;
  for (auto [node, count] : pages) parts.push_back(fmt::format("{} on node {}", count, node));
  TPCOMM_LOG(kDebug, "shm", "rank {}: slot pages: {} (machine: {} NUMA nodes)", ctx_.rank,
             parts.empty() ? std::string("unknown") : fmt::format("{}", fmt::join(parts, ", ")),
             cpu::numa_node_count());
}

void ShmBackend::setup_complete() {
  segment_.populate();  // every slot is reserved: the last step's vote saw every rank's
  segment_.unlink();
  log_slot_nodes();
  single_copy_ = cpu::agree_on_single_copy(*ctx_.bootstrap, ctx_.shm.single_copy,
                                           Deadline::after(ctx_.timeout));
  // Every rank stored its pid before that agreement, which waited for all of them.
  for (int r = 0; r < ctx_.size; ++r) {
    peer_pid_[static_cast<std::size_t>(r)] =
        cpu::peer_process(control(r)->pid.load(std::memory_order_acquire));
  }
  make_team();
  mail_ = std::make_unique<Mailboxes>(
      [this](int from, int to) {
        const std::size_t world = static_cast<std::size_t>(ctx_.size);
        auto* inbox = static_cast<std::uint8_t*>(segment_.base()) +
                      inbox_offset(world, ctx_.shm.workspace_bytes, static_cast<std::size_t>(to));
        return reinterpret_cast<Mailbox*>(inbox) + from;
      },
      ctx_.rank, ctx_.size, [this](int peer) { check_peer(peer); },
      single_copy_ ? Mailboxes::ReadPeer([this](int peer, std::uint64_t address, void* to,
                                                std::size_t bytes) {
        cpu::team_read_peer(nullptr, peer, peer_pid_[static_cast<std::size_t>(peer)], address, to,
                            bytes);
      })
                   : Mailboxes::ReadPeer());
}

void ShmBackend::check_peer(int peer) const {
  const std::int32_t by = header().aborted_by.load(std::memory_order_acquire);
  if (by != 0) throw Error(ErrorCode::kAborted, stopped_by_text(by));
  if (peer < 0) return;  // a receive from any rank: no one peer to look for
  const int pid = control(peer)->pid.load(std::memory_order_acquire);
  if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
    throw Error(ErrorCode::kUnavailable, fmt::format("rank {} (pid {}) died", peer, pid));
  }
}

void ShmBackend::make_team() {
  // Every rank gathers every rank's CPUs, whatever its own TPCOMM_THREADS: the exchange must be
  // the same on all of them.
  const cpu_set_t mine = cpu::current_cpus();
  const auto* raw = reinterpret_cast<const std::uint8_t*>(&mine);
  const auto all = ctx_.bootstrap->all_gather(Bytes(raw, raw + sizeof(mine)), "shm team CPUs",
                                              Deadline::after(ctx_.timeout));
  std::vector<cpu_set_t> group(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    CPU_ZERO(&group[r]);
    std::memcpy(&group[r], all[r].data(), std::min(all[r].size(), sizeof(cpu_set_t)));
  }
  const int machine = ctx_.ranks_on_this_machine > 0 ? ctx_.ranks_on_this_machine : ctx_.size;
  const cpu::TeamSize size = cpu::team_size(ctx_.shm.threads, group, ctx_.rank, machine,
                                            static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  TPCOMM_LOG(kDebug, "shm", "rank {}: team of {} for calls of {} bytes and more", ctx_.rank,
             size.why, ctx_.shm.team_min_bytes);
  if (size.threads > 1) team_ = std::make_unique<cpu::ThreadTeam>(size.threads);
}

void ShmBackend::abort() {
  stop_peers(ctx_.rank + 1);
}

void ShmBackend::announce_close() {
  stop_peers(-(ctx_.rank + 1));
}

void ShmBackend::stop_peers(std::int32_t by) {
  if (segment_.base() == nullptr) return;
  std::int32_t expected = 0;
  // Published before the rank, so that whoever sees the rank sees its call too.
  const std::uint64_t at = current_call_.load(std::memory_order_acquire);
  if (header().aborted_by.load(std::memory_order_acquire) == 0) {
    header().aborted_at_call.store(at, std::memory_order_release);
  }
  header().aborted_by.compare_exchange_strong(expected, by);
  wake_sleepers(header());
}

void ShmBackend::run(const Call& c) {
  // A call in progress is the one an abort now stops; between calls, the next one.
  current_call_.store(c.sequence, std::memory_order_release);
  throw_if_a_peer_aborted(c, false);
  register_input(c);
  call_team_ = team_for(c);
  switch (c.op) {
    case Op::kAllReduce:
      if (c.algorithm == Algorithm::kTwoShot) {
        two_shot(c);
      } else if (c.algorithm == Algorithm::kSingleCopy) {
        all_reduce_single_copy(c);
      } else {
        one_shot(c);
      }
      break;
    case Op::kAllGather:
      if (per_rank_counts(c)) {
        all_gatherv(c);
      } else {
        all_gather(c);
      }
      break;
    case Op::kReduceScatter:
      if (per_rank_counts(c)) {
        reduce_scatterv(c);
      } else {
        reduce_scatter(c);
      }
      break;
    case Op::kAllToAll:
      if (c.send_counts != nullptr) {
        all_to_allv(c);
      } else {
        all_to_all(c);
      }
      break;
    case Op::kGather:
      gather(c);
      break;
    case Op::kScatter:
      scatter(c);
      break;
    case Op::kReduce:
      reduce(c);
      break;
    case Op::kAllReduceRmsNorm:
      if (c.algorithm == Algorithm::kTwoShot) {
        two_shot_rmsnorm(c);
      } else {
        one_shot_rmsnorm(c);
      }
      break;
    case Op::kSendRecv:
      throw Error(ErrorCode::kInternal, "shm: send_recv is no collective call (start/wait)");
  }
  throw_if_a_peer_aborted(c, true);
  current_call_.store(c.sequence + 1, std::memory_order_release);
}

void ShmBackend::throw_if_a_peer_aborted(const Call& c, bool done) const {
  const std::int32_t by = header().aborted_by.load(std::memory_order_acquire);
  if (by == 0) return;
  if (done && header().aborted_at_call.load(std::memory_order_acquire) > c.sequence) return;
  throw Error(ErrorCode::kAborted,
              fmt::format("{} ({})", stopped_by_text(by), describe(c, c.algorithm)));
}

void ShmBackend::register_input(const Call& c) {
  const bool all_reduce = c.op == Op::kAllReduce || c.op == Op::kAllReduceRmsNorm;
  const bool in_place_one_shot =
      all_reduce && c.algorithm != Algorithm::kTwoShot && c.input == c.output;
  // The three planned first read registered inputs in place; the others copy through the lanes.
  const bool reads_registered =
      (all_reduce || c.op == Op::kAllGather || c.op == Op::kReduceScatter) && !per_rank_counts(c);
  mine_at_ = {};
  mine_single_copy_ = 0;
  if (ctx_.shm.registered && reads_registered && !in_place_one_shot &&
      input_bytes(c) >= registered_min_bytes(ctx_.size)) {
    mine_at_ = ctx_.shm.registered->find(c.input, input_bytes(c));
  }
}

void ShmBackend::wait(Flag which, std::uint64_t seq, const Describe& what) {
  wait_for_peers(header(), control(0), ctx_.size, ctx_.rank, which, seq, ctx_.timeout, spin_, what,
                 wake_pending_);
}

void ShmBackend::publish(Flag which, std::uint64_t seq) {
  flag(*control(ctx_.rank), which, seq).store(seq, std::memory_order_release);
  wake_pending_ = true;
}

void ShmBackend::exchange(std::uint64_t seq, const Call& c, Algorithm algorithm,
                          const Describe& what) {
  RankControl& me = *control(ctx_.rank);
  CallHeader& mine = me.lane[seq % kLanes].call;
  mine = CallHeader{static_cast<std::uint32_t>(seq), static_cast<std::uint32_t>(algorithm),
                    identity_of(c)};
  me.lane[seq % kLanes].source = mine_at_.id != 0 ? mine_at_.packed() : mine_single_copy_;
  publish(Flag::kArrived, seq);
  wait(Flag::kArrived, seq, what);
  any_in_place_ = false;
  for (int p = 0; p < ctx_.size; ++p) {
    const std::uint64_t source = control(p)->lane[seq % kLanes].source;
    const bool direct = (source & kSingleCopyFlag) != 0;
    peer_address_[static_cast<std::size_t>(p)] = direct ? source & ~kSingleCopyFlag : 0;
    const auto at = RegisteredAt::unpack(direct ? 0 : source);
    peer_in_[static_cast<std::size_t>(p)] =
        at.id == 0 ? nullptr : ctx_.shm.registered->peer(p, at, input_bytes(c));
    any_in_place_ = any_in_place_ || source != 0;
    // Once per kind: what a test or an operator looks for (a rank reads its own input anyway).
    if (source != 0 && !logged_[direct] && !(direct && p == ctx_.rank)) {
      logged_[direct] = true;
      TPCOMM_LOG(kDebug, "shm", "rank {}: call #{} ({}) reads rank {}'s {} in place", ctx_.rank,
                 c.sequence, to_string(c.op), p,
                 direct ? "input (single copy)" : "registered input");
    }
    const CallHeader& h = control(p)->lane[seq % kLanes].call;
    if (h.sequence != mine.sequence || !(h.call == mine.call) || h.algorithm != mine.algorithm) {
      throw Error(ErrorCode::kMismatch, fmt::format("rank {} called {} but rank {} called {}", p,
                                                    describe(h.call, h.algorithm), ctx_.rank,
                                                    describe(mine.call, mine.algorithm)));
    }
  }
}

const void* const* ShmBackend::sources(std::uint64_t seq, std::size_t byte_offset, const void* own,
                                       std::size_t input_offset) {
  for (int r = 0; r < ctx_.size; ++r) {
    sources_[r] = peer_input(r) ? peer_input(r) + input_offset : lane(r, seq) + byte_offset;
  }
  sources_[static_cast<std::size_t>(ctx_.rank)] = own;
  return sources_.data();
}

void ShmBackend::chunked(const Call& c, std::size_t per_chunk, Algorithm algorithm,
                         const Describe& what, StepFn fill, StepFn consume) {
  std::uint64_t seq = 0;
  StepClock clock(ctx_.shm.stage_times ? stage_ns_ : nullptr);
  for (std::size_t base = 0; base < c.count || (c.count == 0 && base == 0);) {
    const std::size_t n = std::min(per_chunk, c.count - base);
    seq = ++seq_;
    // A zero-element call may pass null buffers; inputs read in place are not copied.
    if (n > 0 && !mine_at_.id && !mine_single_copy_) fill(base, n, seq);
    clock.lap(kFillStage);
    exchange(seq, c, algorithm, what);
    clock.lap(kWaitStage);
    if (n > 0) consume(base, n, seq);
    clock.lap(kConsumeStage);
    flush_wake(header(), wake_pending_);
    if (c.count == 0) break;
    if (base == 0) per_chunk = in_place_step(c, algorithm, per_chunk);
    base += n;
  }
  // A rank whose input its peers read in place may return (and its caller change the input) only
  // once they all finished reading: one barrier per call. Two-shot's reduce barrier already
  // proves it.
  if (any_in_place_ && algorithm != Algorithm::kTwoShot) {
    publish(Flag::kReduced, seq);
    wait(Flag::kReduced, seq, what);
    flush_wake(header(), wake_pending_);
  }
}

std::vector<StageTime> ShmBackend::stage_times() const {
  if (!ctx_.shm.stage_times) return {};
  using std::chrono::nanoseconds;
  return {{"shm fill (copy in)", nanoseconds(stage_ns_[kFillStage].load())},
          {"shm wait (flags, headers)", nanoseconds(stage_ns_[kWaitStage].load())},
          {"shm consume (reduce, copy out)", nanoseconds(stage_ns_[kConsumeStage].load())}};
}

void ShmBackend::copy_in(const Call& c, std::size_t base, std::size_t n, std::uint64_t seq) {
  const std::size_t es = size_of(c.type);
  fill_lane(c, lane(ctx_.rank, seq), static_cast<const std::uint8_t*>(c.input) + base * es, n * es);
}

void ShmBackend::fill_lane(const Call& c, void* to, const void* from, std::size_t bytes) {
  // Streaming stores bounded the worst case of W = 2 16 MiB all-reduces when peers read the
  // writer's cache (docs/communicator.md). Since the W = 2 slots take turns a rank's fill finds
  // its lines in its own cache, and streaming only lost: 16 MiB 2.8-3.8 ms against 1.75-1.81
  // cached over 8 alternations, no slow outlier. More ranks keep the 16 MiB default.
  const std::int64_t asked = ctx_.shm.streaming_fill_bytes;
  const std::size_t limit =
      asked >= 0 ? static_cast<std::size_t>(asked) : (ctx_.size == 2 ? 0 : std::size_t{16} << 20);
  if (c.op != Op::kAllReduce || limit == 0 || c.count * size_of(c.type) < limit) {
    cpu::team_copy(call_team_, to, from, bytes);
    return;
  }
  if (!logged_streaming_) {
    logged_streaming_ = true;
    TPCOMM_LOG(kDebug, "shm", "rank {}: call #{} fills its lane with streaming stores", ctx_.rank,
               c.sequence);
  }
  cpu::team_copy(call_team_, to, from, bytes, true);
}

}  // namespace shm

std::unique_ptr<CollectiveBackend> make_shm_backend(const BackendContext& context) {
  if (context.shm.workspace_bytes < 4096 || context.shm.workspace_bytes % 64 != 0) {
    throw invalid_input(
        fmt::format("TPCOMM_SHM_WORKSPACE={}: expected a multiple of 64 bytes, at least 4096",
                    context.shm.workspace_bytes));
  }
  return std::make_unique<shm::ShmBackend>(context);
}

}  // namespace tpcomm::transport
