// The shared-memory segment of one communicator's `shm` backend: a header, one control block per
// rank (its own cache lines), then one data slot per rank. Synchronisation uses 64-bit sequence
// numbers that only grow: a rank publishes `arrived = seq` once its slot holds its input for
// protocol step `seq`, and `reduced = seq` once it reduced its slice (two-shot); nothing is ever
// reset, so a stale or slow peer can never be mistaken for a current one.
//
// Each slot is split into two lanes used in turn (step seq uses lane seq % 2), and that alone
// makes reuse safe without a "done" flag: a rank refills a lane at step seq+2 only after it saw
// every peer's arrived >= seq+1, which each peer publishes after it finished reading step seq.
// So a fast rank fills step seq+1 while a slow one still reads step seq, and no wait or publish
// guards the refill. Steps are one lane long, small enough that the segment stays in the cache
// while a large message streams through it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/common/call_identity.hpp"

namespace tpcomm::transport::shm {

constexpr std::uint64_t kMagic = 0x31534d4d4f435054ULL;  // "TPCOMMS1"
constexpr std::size_t kLine = 64;
constexpr std::uint64_t kLanes = 2;  // the reuse argument above needs exactly two

struct alignas(kLine) SegmentHeader {
  std::uint64_t magic;
  std::uint32_t world_size;
  std::uint32_t reserved;
  std::uint64_t slot_bytes;
  std::atomic<std::uint32_t> wake;      // bumped on every publish; futex word for sleepers
  std::atomic<std::uint32_t> sleepers;  // ranks inside futex_wait (publishers skip the wake if 0)
  // rank + 1 of the first rank that aborted, -(rank + 1) of one that closed the communicator
  // normally (ShmBackend::announce_close), else 0
  std::atomic<std::int32_t> aborted_by;
  // The first call (the communicator's sequence) that abort did not let complete: a call before
  // it completed on the aborting rank, so it may complete everywhere.
  std::atomic<std::uint64_t> aborted_at_call;
};

// What a rank posted with its input: checked by every peer before reading, so a mismatched call
// is an error, never garbage.
struct CallHeader {
  // The protocol step (one per chunk), its low half: peers are never 2^32 steps apart.
  std::uint32_t sequence;
  std::uint32_t algorithm;  // tpcomm::Algorithm
  CallIdentity call;        // what every rank compares
};

// Inputs below this are copied into the lane even when registered (ShmBackend::register_input):
// below it the copy costs less than the barrier a rank then owes its peers before returning.
// Measured on 2 cores: W = 2 in place was 1.5-3x faster at 4-8 KiB and even at 1-2 KiB; at
// W = 4 (ranks sharing cores, where that barrier waits for a descheduled peer) it was up to
// 2x slower at 1-2 KiB and no faster below 16 KiB. Every rank may choose differently (peers
// follow what each lane header says), so this needs no agreement.
inline std::size_t registered_min_bytes(int world_size) {
  return world_size == 2 ? 4 << 10 : 16 << 10;
}
// A lane header's `source` with this bit: the rest is the input's address in the rank's process.
constexpr std::uint64_t kSingleCopyFlag = std::uint64_t{1} << 63;

// One lane's flag and the header of the step in it share one cache line, so a waiting peer gets
// both with a single transfer.
struct alignas(kLine) LaneControl {
  std::atomic<std::uint64_t> arrived;  // the last step whose input is in this lane
  CallHeader call;                     // that step's call
  // Where that step's input is when it is not in the lane: RegisteredAt::packed() of the
  // rank's whole input in its registered buffer (shm_registered_heap.hpp), or kSingleCopyFlag | its
  // address for a single-copy read; 0 when in the lane.
  std::uint64_t source;
};
static_assert(sizeof(LaneControl) == kLine);

struct alignas(kLine) RankControl {
  LaneControl lane[kLanes];
  alignas(kLine) std::atomic<std::uint64_t> reduced;
  std::atomic<std::int32_t> pid;
  std::atomic<std::uint32_t> mapped;  // 1 once this rank mapped the segment
  // The thread that last waited in a call of this rank (its gettid()): a waiter looks up whether
  // a late peer is runnable, and where, to decide whether to keep spinning (shm_wait.cpp).
  std::atomic<std::int32_t> tid;
};

// The flags peers wait on.
enum class Flag { kArrived, kReduced };
inline std::atomic<std::uint64_t>& flag(RankControl& c, Flag f, std::uint64_t seq) {
  return f == Flag::kArrived ? c.lane[seq % kLanes].arrived : c.reduced;
}

inline std::size_t control_offset() {
  return sizeof(SegmentHeader);
}
inline std::size_t slots_offset(std::size_t world) {
  std::size_t end = control_offset() + world * sizeof(RankControl);
  return (end + 4095) / 4096 * 4096;
}
// A step's bytes where the plan's row names none. The lanes (1 MiB by default) are larger than a
// step so that a call of one step has more places to move through (ShmBackend::step_offset): the
// peer's cache no longer holds the lines of a place by the time a rank fills it again. W = 2,
// float32, in place, lanes of 512 KiB against 1 MiB, us: 16 KiB 2.78 -> 2.6, 64 KiB 6.8 -> 6.4,
// 256 KiB 25.6 -> 23.1-23.8 (its fill 12.0 -> 9.2). Longer calls keep 512 KiB steps: 4 MiB took
// 477-487 us in them and 523 in steps of 1 MiB.
constexpr std::size_t kDefaultStepBytes = std::size_t{512} << 10;

// Bytes of one lane of a slot (a multiple of the cache line).
inline std::size_t lane_bytes(std::size_t slot_bytes) {
  return slot_bytes / kLanes / kLine * kLine;
}
// The slot holding rank r's data at protocol step seq. At W = 2 the two slots take turns, rank r
// using slot (r + seq / 2) % 2, so a rank fills at step seq + 2 the very lines it read from its
// peer at step seq (the same lane; one-step calls stay at the lane's start, step_offset). A line
// a core read after another core wrote it is already this core's to write, while one the peer
// last read has to be taken back from the peer's cache first: two threads alternating 256 KiB
// fills (rep movsb) and reads took 5.4 us per fill this way and 14.5 the other, 64 KiB 1.2 and
// 6.7; the one-shot all-reduce went from 22 to 17-18 us at 256 KiB (docs/results/cpu-2026-12-05-
// impi.md). Intel MPI does the same: its W = 2 all-reduce's second half writes into the cell it
// had just read. Safe for every op: at each step the ranks still hold distinct slots, and the
// lanes' reuse rule above speaks of lanes, not of whose slot a step uses. W > 2 keeps each rank's
// own slot: there a step's lines are read by several peers, none of whom writes them next.
constexpr std::size_t step_slot(int rank, std::uint64_t seq, int world) {
  const auto r = static_cast<std::size_t>(rank);
  return world == 2 ? (r + seq / kLanes) % 2 : r;
}

// Point-to-point messages (send_recv) go through a mailbox per ordered pair of ranks, after the
// slots: rank d's inbox holds one mailbox per sender s (its own unused), on d's NUMA node. A
// mailbox is a ring of kMailSlots chunks: the sender writes chunk `posted` % kMailSlots and then
// publishes posted + 1; the receiver copies it out and publishes taken + 1. The sender writes a
// slot again only once taken shows it read; neither counter is ever reset.
constexpr std::size_t kMailSlots = 2;
constexpr std::size_t kMailChunk = std::size_t{32} << 10;

// What a chunk carries besides its bytes: which message of the pair it belongs to and what that
// message is, which the receiver checks against the receive it posted.
struct ChunkHeader {
  std::uint64_t message;  // the pair's message number, from 1
  std::uint64_t count;    // the message's elements
  std::uint64_t offset;   // this chunk's first byte in the message
  std::int32_t tag;
  std::uint32_t type;  // tpcomm::DataType
  // Non-zero: the whole message is at this address in the sender's process, for the receiver to
  // read in place (single copy); the chunk carries no bytes, and the sender's send completes
  // once the receiver has taken it.
  std::uint64_t source;
};

struct alignas(kLine) Mailbox {
  std::atomic<std::uint64_t> posted;  // chunks the sender wrote (only it writes this line)
  alignas(kLine) std::atomic<std::uint64_t> taken;  // chunks the receiver read
  alignas(kLine) ChunkHeader header[kMailSlots];
  alignas(kLine) std::uint8_t data[kMailSlots][kMailChunk];
};

inline std::size_t mailboxes_offset(std::size_t world, std::size_t slot_bytes) {
  return slots_offset(world) + world * slot_bytes;
}
// Rank `to`'s inbox (every sender's mailbox to it), and its bytes.
inline std::size_t inbox_bytes(std::size_t world) {
  return world * sizeof(Mailbox);
}
inline std::size_t inbox_offset(std::size_t world, std::size_t slot_bytes, std::size_t to) {
  return mailboxes_offset(world, slot_bytes) + to * inbox_bytes(world);
}
inline std::size_t segment_bytes(std::size_t world, std::size_t slot_bytes) {
  return mailboxes_offset(world, slot_bytes) + world * inbox_bytes(world);
}

}  // namespace tpcomm::transport::shm
