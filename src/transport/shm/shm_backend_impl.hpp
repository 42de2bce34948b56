// The shm backend's class, declared once for its two halves: shm_backend.cpp (set-up, abort, a
// call's entry and the step protocol every algorithm runs) and shm_collectives.cpp (the algorithm
// of each operation: what a step fills and consumes).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/function_ref.hpp"
#include "shm_call_text.hpp"
#include "shm_layout.hpp"
#include "shm_mailboxes.hpp"
#include "shm_registered_heap.hpp"
#include "shm_segment.hpp"
#include "shm_wait.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"
#include "transport/common/call_sizes.hpp"
#include "transport/cpu/numa_placement.hpp"
#include "transport/cpu/thread_team.hpp"

namespace tpcomm::transport::shm {

class ShmBackend final : public CollectiveBackend {
 public:
  explicit ShmBackend(BackendContext context)
      : ctx_(std::move(context)),
        lane_bytes_(lane_bytes(ctx_.shm.workspace_bytes)),
        sources_(static_cast<std::size_t>(ctx_.size)),
        peer_in_(static_cast<std::size_t>(ctx_.size)),
        peer_address_(static_cast<std::size_t>(ctx_.size)),
        peer_pid_(static_cast<std::size_t>(ctx_.size)),
        spin_(ranks_have_own_cores(ctx_.ranks_on_this_machine > 0 ? ctx_.ranks_on_this_machine
                                                                  : ctx_.size)
                  ? ctx_.shm.spin
                  : std::chrono::microseconds(0)) {}

  Backend kind() const override { return Backend::kShm; }
  int setup_steps() const override { return 2; }
  std::string setup_step_name(int step) const override {
    return step == 0 ? "shm.create" : "shm.map";
  }

  void run_setup_step(int step, const Deadline& deadline) override;

  // Every rank has mapped it (the vote said so): the name can go, so no crash can leak it. Then
  // every rank (all reach this together) agrees on single-copy reads.
  void setup_complete() override;

  void abort() override;
  void announce_close() override;
  // With TPCOMM_SHM_STAGE_TIMES=1: this rank's time in each part of the protocol's steps.
  std::vector<StageTime> stage_times() const override;

  // A peer's abort is checked before and after the call: a rank that was stopped while its
  // peers gave up can find their inputs still posted and would complete the call as if nothing
  // happened (one atomic load of a line nobody writes until an abort).
  void run(const Call& c) override;

  // Point-to-point through the mailboxes (shm_mailboxes.hpp).
  std::uint64_t start(const PeerMessage& m) override { return mail_->start(m); }
  int wait(std::uint64_t handle, const Deadline& deadline) override {
    return mail_->wait(handle, deadline);
  }

 private:
  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(segment_.base()); }
  // `done`: this call has completed here; it fails only if the abort stopped it (or an earlier
  // one) on the aborting rank, not if that rank aborted after completing it.
  void throw_if_a_peer_aborted(const Call& c, bool done) const;
  // A point-to-point wait's check of its peer: kAborted when a rank aborted or closed,
  // kUnavailable when the peer's process is gone.
  void check_peer(int peer) const;
  // abort() and announce_close(): `by` goes to SegmentHeader::aborted_by.
  void stop_peers(std::int32_t by);
  RankControl* control(int r) const {
    return reinterpret_cast<RankControl*>(static_cast<char*>(segment_.base()) + control_offset()) +
           r;
  }
  // Rank r's lane for protocol step `seq`: lane seq % 2 of the slot step_slot names.
  std::uint8_t* lane(int r, std::uint64_t seq) const {
    return static_cast<std::uint8_t*>(segment_.base()) +
           slots_offset(static_cast<std::size_t>(ctx_.size)) +
           step_slot(r, seq, ctx_.size) * ctx_.shm.workspace_bytes + (seq % kLanes) * lane_bytes_;
  }

  // Bytes a step of this call moves through a lane: the plan row's step, else kDefaultStepBytes;
  // at most a lane.
  std::size_t step_bytes(const Call& c) const {
    return std::min<std::size_t>(c.step_bytes != 0 ? c.step_bytes : kDefaultStepBytes, lane_bytes_);
  }

  // Bytes of a call's input on this rank.
  std::size_t input_bytes(const Call& c) const {
    return input_elements(c, ctx_.rank, ctx_.size) * size_of(c.type);
  }

  // Whether this rank's input is read in place by its peers in this call: it lies in a
  // registered buffer and is at least registered_min_bytes (shm_layout.hpp). Not for one-shot
  // in place: a rank would write its output while peers still read it as their input.
  void register_input(const Call& c);

  // Rank r's input of this call, where it lies; null when it is in r's lane.
  const std::uint8_t* peer_input(int r) const { return peer_in_[static_cast<std::size_t>(r)]; }

  // Waits until every peer's `field` reached `seq`.
  void wait(Flag which, std::uint64_t seq, const Describe& what);

  void publish(Flag which, std::uint64_t seq);

  // Publishes this rank's slot for step `seq` and waits for every peer's, checking that they
  // are the same call.
  void exchange(std::uint64_t seq, const Call& c, Algorithm algorithm, const Describe& what);

  // The sources of a reduction in rank order: every peer's lane of step `seq` at `byte_offset`,
  // and for this rank `own`, the input its lane is a copy of. Reading the input rather than the
  // lane just filled matters: those stores are still leaving the core (their lines were shared
  // with the peers that read the lane two steps ago), and loads from them would wait for that;
  // measured, one-shot W = 2 is 25-35% faster at 4-64 KiB. Same values, same order, same result.
  // A peer whose input is registered is read at `input_offset` of its input instead.
  const void* const* sources(std::uint64_t seq, std::size_t byte_offset, const void* own,
                             std::size_t input_offset);

  // The step protocol around every chunk of a call (shm_backend.cpp): fill this rank's lane,
  // publish and check headers, consume, flush the wake. A zero-element call still takes one
  // step, so that every rank stays in step and a mismatch is still seen. (No wait guards the
  // fill: see the lanes in shm_layout.hpp.) Both callbacks get (first element, elements, step).
  using StepFn = common::FunctionRef<void(std::size_t, std::size_t, std::uint64_t)>;
  void chunked(const Call& c, std::size_t per_chunk, Algorithm algorithm, const Describe& what,
               StepFn fill, StepFn consume);
  // The step of a call's later steps, once the first step's headers are in (shm_backend.cpp).
  std::size_t in_place_step(const Call& c, Algorithm algorithm, std::size_t per_chunk);

  // Copies into this rank's lane. An all-reduce of TPCOMM_SHM_STREAMING_FILL bytes or more uses
  // streaming stores: peers then read the lane from memory instead of from this core's cache,
  // which the 2-vCPU VM made several times slower at moments (W = 2, 16 MiB, 30 alternations:
  // cached fills median 2652 us, worst 9596; streaming 3357, worst 4188; Open MPI 5700-8000).
  // Only how this rank writes its lane changes, so ranks need not agree on it. The debug log says
  // when a communicator first fills this way.
  void fill_lane(const Call& c, void* to, const void* from, std::size_t bytes);

  // Copies elements [base, base + n) of the input into this rank's lane of step `seq`: the
  // fill of the algorithms whose lane holds the input as it is.
  void copy_in(const Call& c, std::size_t base, std::size_t n, std::uint64_t seq);
  // The parts of a protocol step that TPCOMM_SHM_STAGE_TIMES clocks (stage_times()): a lap
  // adds the time since the last one to its part; with no totals (the default) it reads no
  // clock.
  enum StepStage { kFillStage = 0, kWaitStage = 1, kConsumeStage = 2 };
  class StepClock {
   public:
    explicit StepClock(std::atomic<std::int64_t>* totals)
        : totals_(totals), last_(totals ? std::chrono::steady_clock::now() : Clock::time_point{}) {}
    void lap(StepStage stage) {
      if (totals_ == nullptr) return;
      const auto now = Clock::now();
      totals_[stage].fetch_add((now - last_).count(), std::memory_order_relaxed);
      last_ = now;
    }

   private:
    using Clock = std::chrono::steady_clock;
    std::atomic<std::int64_t>* totals_;
    Clock::time_point last_;
  };
  std::atomic<std::int64_t> stage_ns_[3] = {};  // [StepStage]: steady-clock nanoseconds
  // Where a step of `bytes` lies in its lane (shm_backend.cpp says why it moves).
  std::size_t step_offset(std::uint64_t seq, std::size_t bytes) const;
  // After a one-step call `seq` of `bytes` that filled its lane: takes the place the next step
  // fills if it has the same size, for writing, while the caller is away (shm_backend.cpp).
  void take_next_place(std::uint64_t seq, std::size_t bytes);

  // The team that splits this call's copies and reductions (a call of at least
  // team_min_bytes_ when the team has more than one thread), else null: the caller alone.
  cpu::ThreadTeam* team_for(const Call& c) const {
    const std::size_t bytes =
        std::max(input_bytes(c), output_elements(c, ctx_.rank, ctx_.size) * size_of(c.type));
    return team_ && bytes >= ctx_.shm.team_min_bytes ? team_.get() : nullptr;
  }

  // Set-up: binds this rank's slot (at `offset`) to the rank's NUMA node before its pages exist
  // (numa/numa_placement.hpp); once populated, the debug log says where its pages are.
  void place_slot(std::size_t offset);
  void log_slot_nodes() const;

  // Set-up: how many threads this rank's team has (an all-gather of every rank's CPUs when the
  // context leaves it to the default), and the team.
  void make_team();

  // Every rank copies its chunk in, then reduces all slots in rank order into its output.
  void one_shot(const Call& c);

  // all_reduce_rmsnorm as one-shot (shm_rmsnorm.cpp): steps of whole rows, each rank sums every
  // row from the lanes and adds and normalises its own copy (kernels/cpu/add_rmsnorm.hpp).
  void one_shot_rmsnorm(const Call& c);
  // Two-shot by rows: each rank sums, adds and normalises its share of a step's rows into its
  // lane (its new residual rows beside them), then every rank copies every share out.
  void two_shot_rmsnorm(const Call& c);

  // Reduce-scatter of slices into each owner's slot, then everyone gathers the reduced slices.
  void two_shot(const Call& c);

  // One-shot whose peers' inputs are read where they lie, step by step into a private buffer
  // (single_copy.hpp), instead of copied into lanes first; a rank whose input is its output
  // (peers would read what it overwrites), or a group where the set-up vote refused single-copy
  // reads, goes through its lane as one-shot does. Same sources, same order: the same bits.
  void all_reduce_single_copy(const Call& c);

  // single_copy (where the set-up vote allowed it: the same on every rank, as the plan is): in
  // one step, each peer's input read where it lies; else chunk by chunk through the lanes.
  void all_gather(const Call& c);

  // Each slot holds W blocks of the chunk; rank r reduces block r of every slot.
  void reduce_scatter(const Call& c);

  // shm_exchange_ops.cpp. all_to_all: each slot holds W blocks of the chunk, block r for rank
  // r, which copies block r of every slot out. all_to_allv: a first step posts every rank's
  // counts, which every rank checks pair by pair; then each step moves the next part of every
  // pair's block, as many steps as the largest block needs.
  void all_to_all(const Call& c);
  void all_to_allv(const Call& c);
  // single_copy (where the set-up vote allowed it): in one step, each peer's block for this rank
  // read where it lies in the peer's input, at `from_at[r]` elements (peer_address_ from the
  // step just exchanged), `counts[r]` elements into `out` at `to_at[r]`; then the closing barrier
  // (a rank's input may change once every peer has read it).
  void read_blocks(const Call& c, std::uint64_t seq, const std::size_t* counts,
                   const std::vector<std::size_t>& from_at, const std::vector<std::size_t>& to_at,
                   const Describe& what);
  // Blocks of per-rank counts (shm_vector_ops.cpp), step by step as all_to_allv's data: each
  // step moves the next part of every rank's block, as many steps as the largest block needs.
  void all_gatherv(const Call& c);
  void reduce_scatterv(const Call& c);
  // Elements of a block of `count` that the step starting at element `base` moves, at most
  // `per` (the steps of the calls with counts).
  static std::size_t block_part(std::size_t count, std::size_t base, std::size_t per) {
    return count > base ? std::min(per, count - base) : std::size_t{0};
  }
  // Where each block of `counts` starts (into `at`, size() + 1 entries), and the largest block.
  std::size_t block_starts(const std::size_t* counts, std::vector<std::size_t>& at) const;
  // Rooted: gather and reduce through every other rank's lane into the root; scatter through
  // the root's lane, W blocks of the chunk as all_to_all's.
  void gather(const Call& c);
  void scatter(const Call& c);
  void reduce(const Call& c);
  // all_to_allv: every pair's count from the posted counts, checked (kMismatch on every rank
  // alike); returns the largest block between two different ranks.
  std::size_t agree_on_counts(const Call& c, std::uint64_t seq, const Describe& what);

  BackendContext ctx_;
  std::size_t lane_bytes_;
  std::unique_ptr<cpu::ThreadTeam> team_;       // null: one thread
  cpu::ThreadTeam* call_team_ = nullptr;        // team_for(the current call)
  std::vector<const void*> sources_;            // scratch for lanes_at, so a call allocates nothing
  std::vector<std::size_t> send_at_, recv_at_;  // all_to_allv: where each block starts
  std::vector<std::size_t> peer_at_;            // single-copy all_to_all(v): each peer's block
  std::vector<const std::uint8_t*> peer_in_;    // each rank's registered input this step, or null
  RegisteredAt mine_at_;                        // this rank's, posted in its lane header
  std::vector<std::uint64_t> peer_address_;     // each rank's input for a single-copy read, or 0
  std::vector<int> peer_pid_;    // each rank's process for read_peer_memory (set-up), 0: this one
  cpu::NodeBuffer peer_chunks_;  // single-copy all-reduce: a step of each peer, on this rank's node
  std::pair<std::uint8_t*, std::size_t> slot_pages_{nullptr, 0};  // this rank's slot's pages
  std::uint64_t mine_single_copy_ = 0;  // this rank's, with kSingleCopyFlag, or 0
  bool single_copy_ = false;            // every rank can read every peer (set-up vote)
  bool any_in_place_ = false;           // some rank's input this step is read in place
  bool logged_[2] = {false, false};     // [single copy]: first in-place read logged
  bool logged_wide_steps_ = false;      // in_place_step's first widening logged
  bool logged_streaming_ = false;       // first streaming lane fill logged
  Segment segment_;
  std::unique_ptr<Mailboxes> mail_;  // made once every rank mapped the segment
  std::uint64_t seq_ = 0;
  std::atomic<std::uint64_t> current_call_{1};  // read by abort() on another thread
  bool wake_pending_ = false;  // a publish whose sleepers are not yet woken (shm_wait.hpp)
  // How long a wait spins: TPCOMM_SHM_SPIN_US while every rank on this machine has a core.
  const std::chrono::microseconds spin_;
};

}  // namespace tpcomm::transport::shm
