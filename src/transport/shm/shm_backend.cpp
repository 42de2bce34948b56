// The shm backend: segment set-up in two voted steps, and one-shot / two-shot all-reduce,
// all-gather and reduce-scatter, chunked through the per-rank slots.
#include "shm_backend.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "common/segment_names.hpp"
#include "registered_heap.hpp"
#include "shm_call_text.hpp"
#include "shm_layout.hpp"
#include "shm_reduce.hpp"
#include "shm_segment.hpp"
#include "shm_wait.hpp"
#include "single_copy.hpp"
#include "streaming_copy.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport {
namespace {

using shm::describe;
using shm::Describe;
using shm::describer;
using shm::RankControl;

using shm::kSingleCopyFlag;
using shm::SegmentHeader;

class ShmBackend final : public CollectiveBackend {
 public:
  explicit ShmBackend(BackendContext context)
      : ctx_(std::move(context)),
        lane_bytes_(shm::lane_bytes(ctx_.shm_workspace_bytes)),
        sources_(static_cast<std::size_t>(ctx_.size)),
        peer_in_(static_cast<std::size_t>(ctx_.size)),
        peer_address_(static_cast<std::size_t>(ctx_.size)) {}

  Backend kind() const override { return Backend::kShm; }
  int setup_steps() const override { return 2; }
  std::string setup_step_name(int step) const override {
    return step == 0 ? "shm.create" : "shm.map";
  }

  void run_setup_step(int step, const Deadline& deadline) override {
    const std::size_t bytes =
        shm::segment_bytes(static_cast<std::size_t>(ctx_.size), ctx_.shm_workspace_bytes);
    if (step == 0) {
      if (ctx_.rank != 0) return;
      std::random_device rd;
      const std::string name =
          detail::segment_name("shm", fmt::format("{:016x}{:08x}", ctx_.comm_id, rd()));
      segment_.create(
          name, bytes,
          fmt::format("TPCOMM_SHM_WORKSPACE (now {} bytes per rank)", ctx_.shm_workspace_bytes));
      auto* h = new (segment_.base()) SegmentHeader();
      h->magic = shm::kMagic;
      h->world_size = static_cast<std::uint32_t>(ctx_.size);
      h->slot_bytes = ctx_.shm_workspace_bytes;
      for (int r = 0; r < ctx_.size; ++r) new (control(r)) RankControl();
      return;
    }
    // Step 1: everyone learns the name from rank 0 and maps the segment.
    const std::string mine = ctx_.rank == 0 ? segment_.name() : std::string();
    Bytes name =
        ctx_.bootstrap->broadcast(Bytes(mine.begin(), mine.end()), 0, "shm segment name", deadline);
    if (ctx_.rank != 0) segment_.open(std::string(name.begin(), name.end()), bytes);
    if (header().magic != shm::kMagic ||
        header().world_size != static_cast<std::uint32_t>(ctx_.size) ||
        header().slot_bytes != ctx_.shm_workspace_bytes) {
      throw Error(ErrorCode::kMismatch,
                  "shm: the segment's header does not match this group "
                  "(ranks with different TPCOMM_SHM_WORKSPACE?)");
    }
    control(ctx_.rank)->pid.store(getpid(), std::memory_order_release);
    control(ctx_.rank)->mapped.store(1, std::memory_order_release);
  }

  // Every rank has mapped it (the vote said so): the name can go, so no crash can leak it. Then
  // every rank (all reach this together) agrees on single-copy reads.
  void setup_complete() override {
    segment_.unlink();
    single_copy_ = shm::agree_on_single_copy(*ctx_.bootstrap, ctx_.shm_single_copy,
                                             Deadline::after(ctx_.timeout));
  }

  void abort() override {
    if (segment_.base() == nullptr) return;
    std::int32_t expected = 0;
    // Published before the rank, so that whoever sees the rank sees its call too.
    const std::uint64_t at = current_call_.load(std::memory_order_acquire);
    if (header().aborted_by.load(std::memory_order_acquire) == 0) {
      header().aborted_at_call.store(at, std::memory_order_release);
    }
    header().aborted_by.compare_exchange_strong(expected, ctx_.rank + 1);
    shm::wake_sleepers(header());
  }

  // A peer's abort is checked before and after the call: a rank that was stopped while its
  // peers gave up can find their inputs still posted and would complete the call as if nothing
  // happened (one atomic load of a line nobody writes until an abort).
  void run(const Call& c) override {
    // A call in progress is the one an abort now stops; between calls, the next one.
    current_call_.store(c.sequence, std::memory_order_release);
    throw_if_a_peer_aborted(c, false);
    const shm::RegisteredHeap::CallScope scope(ctx_.registered.get());
    register_input(c);
    switch (c.op) {
      case Op::kAllReduce:
        c.algorithm == Algorithm::kTwoShot ? two_shot(c) : one_shot(c);
        break;
      case Op::kAllGather:
        all_gather(c);
        break;
      case Op::kReduceScatter:
        reduce_scatter(c);
        break;
    }
    throw_if_a_peer_aborted(c, true);
    current_call_.store(c.sequence + 1, std::memory_order_release);
  }

 private:
  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(segment_.base()); }
  // `done`: this call has completed here; it fails only if the abort stopped it (or an earlier
  // one) on the aborting rank, not if that rank aborted after completing it.
  void throw_if_a_peer_aborted(const Call& c, bool done) const {
    const std::int32_t by = header().aborted_by.load(std::memory_order_acquire);
    if (by == 0) return;
    if (done && header().aborted_at_call.load(std::memory_order_acquire) > c.sequence) return;
    throw Error(ErrorCode::kAborted,
                fmt::format("rank {} aborted the group ({})", by - 1, describe(c, c.algorithm)));
  }
  RankControl* control(int r) const {
    return reinterpret_cast<RankControl*>(static_cast<char*>(segment_.base()) +
                                          shm::control_offset()) +
           r;
  }
  // Rank r's lane for protocol step `seq`.
  std::uint8_t* lane(int r, std::uint64_t seq) const {
    return static_cast<std::uint8_t*>(segment_.base()) +
           shm::slots_offset(static_cast<std::size_t>(ctx_.size)) +
           static_cast<std::size_t>(r) * ctx_.shm_workspace_bytes +
           (seq % shm::kLanes) * lane_bytes_;
  }

  // Bytes a step of this call moves through a lane: the plan row's step, at most a lane.
  std::size_t step_bytes(const Call& c) const {
    return c.step_bytes != 0 ? std::min<std::size_t>(c.step_bytes, lane_bytes_) : lane_bytes_;
  }

  // Bytes of a call's input on every rank.
  std::size_t input_bytes(const Call& c) const {
    const std::size_t w = c.op == Op::kReduceScatter ? static_cast<std::size_t>(ctx_.size) : 1;
    return c.count * w * size_of(c.type);
  }

  // Whether this rank's input is read in place by its peers in this call: it lies in a
  // registered buffer and is at least registered_min_bytes (shm_layout.hpp). Not for one-shot
  // in place: a rank would write its output while peers still read it as their input.
  void register_input(const Call& c) {
    const bool in_place_one_shot =
        c.op == Op::kAllReduce && c.algorithm != Algorithm::kTwoShot && c.input == c.output;
    mine_at_ = {};
    mine_single_copy_ = 0;
    if (ctx_.registered && !in_place_one_shot &&
        input_bytes(c) >= shm::registered_min_bytes(ctx_.size)) {
      mine_at_ = ctx_.registered->find(c.input, input_bytes(c));
    }
  }

  // Rank r's input of this call, where it lies; null when it is in r's lane.
  const std::uint8_t* peer_input(int r) const { return peer_in_[static_cast<std::size_t>(r)]; }

  // Waits until every peer's `field` reached `seq`.
  void wait(shm::Flag which, std::uint64_t seq, const Describe& what) {
    shm::wait_for_peers(header(), control(0), ctx_.size, ctx_.rank, which, seq, ctx_.timeout, what,
                        wake_pending_);
  }

  void publish(shm::Flag which, std::uint64_t seq) {
    shm::flag(*control(ctx_.rank), which, seq).store(seq, std::memory_order_release);
    wake_pending_ = true;
  }

  // Publishes this rank's slot for step `seq` and waits for every peer's, checking that they
  // are the same call.
  void exchange(std::uint64_t seq, const Call& c, Algorithm algorithm, const Describe& what) {
    RankControl& me = *control(ctx_.rank);
    shm::CallHeader& mine = me.lane[seq % shm::kLanes].call;
    mine = shm::CallHeader{seq, identity_of(c), static_cast<std::uint32_t>(algorithm)};
    me.lane[seq % shm::kLanes].source = mine_at_.id != 0 ? mine_at_.packed() : mine_single_copy_;
    publish(shm::Flag::kArrived, seq);
    wait(shm::Flag::kArrived, seq, what);
    any_in_place_ = false;
    for (int p = 0; p < ctx_.size; ++p) {
      const std::uint64_t source = control(p)->lane[seq % shm::kLanes].source;
      const bool direct = (source & kSingleCopyFlag) != 0;
      peer_address_[static_cast<std::size_t>(p)] = direct ? source & ~kSingleCopyFlag : 0;
      const auto at = shm::RegisteredAt::unpack(direct ? 0 : source);
      peer_in_[static_cast<std::size_t>(p)] =
          at.id == 0 ? nullptr : ctx_.registered->peer(p, at, input_bytes(c));
      any_in_place_ = any_in_place_ || source != 0;
      // Once per kind: what a test or an operator looks for (a rank reads its own input anyway).
      if (source != 0 && !logged_[direct] && !(direct && p == ctx_.rank)) {
        logged_[direct] = true;
        TPCOMM_LOG(kDebug, "shm", "rank {}: call #{} reads rank {}'s {} in place", ctx_.rank,
                   c.sequence, p, direct ? "input (single copy)" : "registered input");
      }
      const shm::CallHeader& h = control(p)->lane[seq % shm::kLanes].call;
      if (h.sequence != mine.sequence || !(h.call == mine.call) || h.algorithm != mine.algorithm) {
        throw Error(ErrorCode::kMismatch, fmt::format("rank {} called {} but rank {} called {}", p,
                                                      describe(h.call, h.algorithm), ctx_.rank,
                                                      describe(mine.call, mine.algorithm)));
      }
    }
  }

  // The sources of a reduction in rank order: every peer's lane of step `seq` at `byte_offset`,
  // and for this rank `own`, the input its lane is a copy of. Reading the input rather than the
  // lane just filled matters: those stores are still leaving the core (their lines were shared
  // with the peers that read the lane two steps ago), and loads from them would wait for that;
  // measured, one-shot W = 2 is 25-35% faster at 4-64 KiB. Same values, same order, same result.
  // A peer whose input is registered is read at `input_offset` of its input instead.
  const void* const* sources(std::uint64_t seq, std::size_t byte_offset, const void* own,
                             std::size_t input_offset) {
    for (int r = 0; r < ctx_.size; ++r) {
      sources_[r] = peer_input(r) ? peer_input(r) + input_offset : lane(r, seq) + byte_offset;
    }
    sources_[static_cast<std::size_t>(ctx_.rank)] = own;
    return sources_.data();
  }

  // The step protocol around every chunk of a call: fill this rank's lane, publish and check
  // headers, consume, flush the wake. A zero-element call still takes one step, so that every
  // rank stays in step and a mismatch is still seen. (No wait guards the fill: see the lanes in
  // shm_layout.hpp.)
  template <typename Fill, typename Consume>
  void chunked(const Call& c, std::size_t per_chunk, Algorithm algorithm, const Describe& what,
               Fill fill, Consume consume) {
    std::uint64_t seq = 0;
    for (std::size_t base = 0; base < c.count || (c.count == 0 && base == 0); base += per_chunk) {
      const std::size_t n = std::min(per_chunk, c.count - base);
      seq = ++seq_;
      // A zero-element call may pass null buffers; inputs read in place are not copied.
      if (n > 0 && !mine_at_.id && !mine_single_copy_) fill(base, n, seq);
      exchange(seq, c, algorithm, what);
      if (n > 0) consume(base, n, seq);
      shm::flush_wake(header(), wake_pending_);
      if (c.count == 0) break;
    }
    // A rank whose input its peers read in place may return (and its caller change the input)
    // only once they all finished reading: one barrier per call. Two-shot's reduce barrier
    // already proves it.
    if (any_in_place_ && algorithm != Algorithm::kTwoShot) {
      publish(shm::Flag::kReduced, seq);
      wait(shm::Flag::kReduced, seq, what);
      shm::flush_wake(header(), wake_pending_);
    }
  }

  // Copies this chunk of the input into this rank's lane.
  auto copy_in(const Call& c) {
    return [this, &c](std::size_t base, std::size_t n, std::uint64_t seq) {
      const std::size_t es = size_of(c.type);
      std::memcpy(lane(ctx_.rank, seq), static_cast<const std::uint8_t*>(c.input) + base * es,
                  n * es);
    };
  }

  // Every rank copies its chunk in, then reduces all slots in rank order into its output.
  void one_shot(const Call& c) {
    const std::size_t es = size_of(c.type);
    const auto* in = static_cast<const std::uint8_t*>(c.input);
    chunked(c, step_bytes(c) / es, Algorithm::kOneShot, describer(c, Algorithm::kOneShot),
            copy_in(c), [&](std::size_t base, std::size_t n, std::uint64_t seq) {
              shm::reduce_slots(sources(seq, 0, in + base * es, base * es), ctx_.size, n, c.type,
                                c.reduce, static_cast<std::uint8_t*>(c.output) + base * es);
            });
  }

  // Reduce-scatter of slices into each owner's slot, then everyone gathers the reduced slices.
  void two_shot(const Call& c) {
    const std::size_t es = size_of(c.type);
    const auto w = static_cast<std::size_t>(ctx_.size);
    const auto* in = static_cast<const std::uint8_t*>(c.input);
    const Describe what = describer(c, Algorithm::kTwoShot);
    auto slice = [w](std::size_t n, std::size_t r) {
      const std::size_t lo = n * r / w;
      return std::make_pair(lo, n * (r + 1) / w - lo);
    };
    // The lane gets every slice but this rank's own, which it reduces from `in` into the lane.
    auto fill = [&](std::size_t base, std::size_t n, std::uint64_t seq) {
      const auto [lo, len] = slice(n, static_cast<std::size_t>(ctx_.rank));
      std::memcpy(lane(ctx_.rank, seq), in + base * es, lo * es);
      std::memcpy(lane(ctx_.rank, seq) + (lo + len) * es, in + (base + lo + len) * es,
                  (n - lo - len) * es);
    };
    chunked(c, step_bytes(c) / es, Algorithm::kTwoShot, what, fill,
            [&](std::size_t base, std::size_t n, std::uint64_t seq) {
              const auto [lo, len] = slice(n, static_cast<std::size_t>(ctx_.rank));
              shm::reduce_slots(sources(seq, lo * es, in + (base + lo) * es, (base + lo) * es),
                                ctx_.size, len, c.type, c.reduce, lane(ctx_.rank, seq) + lo * es);
              publish(shm::Flag::kReduced, seq);
              wait(shm::Flag::kReduced, seq, what);
              for (std::size_t r = 0; r < w; ++r) {
                const auto [rlo, rlen] = slice(n, r);
                std::memcpy(static_cast<std::uint8_t*>(c.output) + (base + rlo) * es,
                            lane(static_cast<int>(r), seq) + rlo * es, rlen * es);
              }
            });
  }

  // single_copy (where the set-up vote allowed it: the same on every rank, as the plan is): in
  // one step, each peer's input read where it lies; else chunk by chunk through the lanes.
  void all_gather(const Call& c) {
    const std::size_t es = size_of(c.type);
    auto* out = static_cast<std::uint8_t*>(c.output);
    const auto* in = static_cast<const std::uint8_t*>(c.input);
    const bool direct = single_copy_ && c.algorithm == Algorithm::kSingleCopy;
    if (direct && !mine_at_.id)
      mine_single_copy_ = reinterpret_cast<std::uint64_t>(in) | kSingleCopyFlag;
    chunked(c, direct ? std::max<std::size_t>(c.count, 1) : step_bytes(c) / es, c.algorithm,
            describer(c, c.algorithm), copy_in(c),
            [&](std::size_t base, std::size_t n, std::uint64_t seq) {
              for (int r = 0; r < ctx_.size; ++r) {
                const auto ur = static_cast<std::size_t>(r);
                std::uint8_t* to = out + (ur * c.count + base) * es;
                if (peer_address_[ur] != 0 && r != ctx_.rank) {
                  shm::read_peer_memory(r, control(r)->pid.load(std::memory_order_acquire),
                                        peer_address_[ur] + base * es, to, n * es);
                  continue;
                }
                const std::uint8_t* from = r == ctx_.rank && peer_address_[ur] != 0 ? in + base * es
                                           : peer_input(r) ? peer_input(r) + base * es
                                                           : lane(r, seq);
                if (from != to)
                  shm::copy_block(to, from, n * es, r == ctx_.rank);  // equal: in place
              }
            });
  }

  // Each slot holds W blocks of the chunk; rank r reduces block r of every slot.
  void reduce_scatter(const Call& c) {
    const std::size_t es = size_of(c.type);
    const auto w = static_cast<std::size_t>(ctx_.size);
    const auto* in = static_cast<const std::uint8_t*>(c.input);
    chunked(
        c, std::max<std::size_t>(1, step_bytes(c) / (es * w)), Algorithm::kOneShot,
        describer(c, Algorithm::kOneShot),
        [&](std::size_t base, std::size_t n, std::uint64_t seq) {
          for (std::size_t b = 0; b < w; ++b) {  // not its own block: it reads that from `in`
            if (b == static_cast<std::size_t>(ctx_.rank)) continue;
            std::memcpy(lane(ctx_.rank, seq) + b * n * es, in + (b * c.count + base) * es, n * es);
          }
        },
        [&](std::size_t base, std::size_t n, std::uint64_t seq) {
          const std::size_t block = static_cast<std::size_t>(ctx_.rank) * c.count + base;
          shm::reduce_slots(sources(seq, static_cast<std::size_t>(ctx_.rank) * n * es,
                                    in + block * es, block * es),
                            ctx_.size, n, c.type, c.reduce,
                            static_cast<std::uint8_t*>(c.output) + base * es);
        });
  }

  BackendContext ctx_;
  std::size_t lane_bytes_;
  std::vector<const void*> sources_;          // scratch for lanes_at, so a call allocates nothing
  std::vector<const std::uint8_t*> peer_in_;  // each rank's registered input this step, or null
  shm::RegisteredAt mine_at_;                 // this rank's, posted in its lane header
  std::vector<std::uint64_t> peer_address_;   // each rank's input for a single-copy read, or 0
  std::uint64_t mine_single_copy_ = 0;        // this rank's, with kSingleCopyFlag, or 0
  bool single_copy_ = false;                  // every rank can read every peer (set-up vote)
  bool any_in_place_ = false;                 // some rank's input this step is read in place
  bool logged_[2] = {false, false};           // [single copy]: first in-place read logged
  shm::Segment segment_;
  std::uint64_t seq_ = 0;
  std::atomic<std::uint64_t> current_call_{1};  // read by abort() on another thread
  bool wake_pending_ = false;  // a publish whose sleepers are not yet woken (shm_wait.hpp)
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_shm_backend(const BackendContext& context) {
  if (context.shm_workspace_bytes < 4096 || context.shm_workspace_bytes % 64 != 0) {
    throw invalid_input(
        fmt::format("TPCOMM_SHM_WORKSPACE={}: expected a multiple of 64 bytes, at least 4096",
                    context.shm_workspace_bytes));
  }
  return std::make_unique<ShmBackend>(context);
}

}  // namespace tpcomm::transport
