// Point-to-point messages through the mailboxes (shm_mailboxes.hpp).
#include "shm_mailboxes.hpp"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport::shm {

namespace {

// Messages from this size are read in place when single-copy reads are allowed: below it the
// system call and the receiver's acknowledgement cost more than the ring's second copy
// (tpcomm bench --op send_recv, docs/results/cpu-2026-12-04-exchanges.md).
constexpr std::size_t kDirectMessageBytes = std::size_t{16} << 10;

}  // namespace

Mailboxes::Mailboxes(std::function<Mailbox*(int, int)> box, int rank, int world,
                     std::function<void(int)> check_peers, ReadPeer read_peer)
    : box_(std::move(box)),
      rank_(rank),
      world_(world),
      check_peers_(std::move(check_peers)),
      read_peer_(std::move(read_peer)),
      sends_(static_cast<std::size_t>(world)),
      receives_(static_cast<std::size_t>(world)),
      sent_(static_cast<std::size_t>(world)),
      received_(static_cast<std::size_t>(world)),
      posted_(static_cast<std::size_t>(world)) {}

std::string Mailboxes::text(const Pending& p) const {
  return fmt::format("{}({} x {}, tag {}) {} {} #{}", p.m.send ? "send" : "recv",
                     to_string(p.m.type), p.m.count, p.m.tag, p.m.send ? "to" : "from",
                     p.m.peer < 0 ? std::string("any rank") : fmt::format("rank {}", p.m.peer),
                     p.m.sequence);
}

std::uint64_t Mailboxes::start(const PeerMessage& m) {
  Pending p{m, next_handle_++, 0, 0, false};
  pending_[p.handle] = m.peer;
  if (m.peer < 0) {
    any_.push_back(p);
  } else {
    const auto peer = static_cast<std::size_t>(m.peer);
    p.message = m.send ? ++sent_[peer] : ++received_[peer];
    (m.send ? sends_ : receives_)[peer].push_back(p);
  }
  progress();  // a send that fits goes out now: its buffer is free once started
  return p.handle;
}

bool Mailboxes::done(const Pending& p) const {
  if (p.moved < p.m.count * size_of(p.m.type) || !p.any_chunk) return false;
  return p.ack == 0 || box_(rank_, p.m.peer)->taken.load(std::memory_order_acquire) >= p.ack;
}

bool Mailboxes::progress_send(Pending& p) {
  Mailbox& b = *box_(rank_, p.m.peer);
  const std::size_t total = p.m.count * size_of(p.m.type);
  std::uint64_t& posted = posted_[static_cast<std::size_t>(p.m.peer)];
  bool moved = false;
  if (read_peer_ && total >= kDirectMessageBytes && !p.any_chunk) {
    if (posted - b.taken.load(std::memory_order_acquire) >= kMailSlots) return false;
    b.header[posted % kMailSlots] = ChunkHeader{p.message,
                                                p.m.count,
                                                0,
                                                p.m.tag,
                                                static_cast<std::uint32_t>(p.m.type),
                                                reinterpret_cast<std::uint64_t>(p.m.buffer)};
    p.moved = total;
    p.any_chunk = true;
    p.ack = posted + 1;
    b.posted.store(++posted, std::memory_order_release);
    return true;
  }
  while ((p.moved < total || !p.any_chunk) &&
         posted - b.taken.load(std::memory_order_acquire) < kMailSlots) {
    const std::size_t slot = posted % kMailSlots;
    const std::size_t n = std::min(kMailChunk, total - p.moved);
    b.header[slot] = ChunkHeader{
        p.message, p.m.count, p.moved, p.m.tag, static_cast<std::uint32_t>(p.m.type), 0};
    if (n > 0) std::memcpy(b.data[slot], static_cast<const std::uint8_t*>(p.m.buffer) + p.moved, n);
    p.moved += n;
    p.any_chunk = true;
    b.posted.store(++posted, std::memory_order_release);
    moved = true;
  }
  return moved;
}

bool Mailboxes::progress_receive(Pending& p) {
  Mailbox& b = *box_(p.m.peer, rank_);
  const std::size_t total = p.m.count * size_of(p.m.type);
  std::uint64_t taken = b.taken.load(std::memory_order_relaxed);  // only this rank writes it
  bool moved = false;
  while ((p.moved < total || !p.any_chunk) && b.posted.load(std::memory_order_acquire) > taken) {
    const std::size_t slot = taken % kMailSlots;
    const ChunkHeader h = b.header[slot];
    if (h.message != p.message || h.count != p.m.count || h.tag != p.m.tag ||
        h.type != static_cast<std::uint32_t>(p.m.type) || h.offset != p.moved) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("rank {} sent send({} x {}, tag {}) as its message {} to rank {}, "
                              "but rank {} receives {}",
                              p.m.peer, to_string(static_cast<DataType>(h.type)), h.count, h.tag,
                              h.message, rank_, rank_, text(p)));
    }
    if (h.source != 0) {  // the whole message, read where it lies in the sender's buffer
      read_peer_(p.m.peer, h.source, p.m.buffer, total);
      p.moved = total;
      p.any_chunk = true;
      b.taken.store(++taken, std::memory_order_release);
      return true;
    }
    const std::size_t n = std::min(kMailChunk, total - p.moved);
    if (n > 0) std::memcpy(static_cast<std::uint8_t*>(p.m.buffer) + p.moved, b.data[slot], n);
    p.moved += n;
    p.any_chunk = true;
    b.taken.store(++taken, std::memory_order_release);
    moved = true;
  }
  return moved;
}

bool Mailboxes::match_any() {
  if (any_.empty()) return false;
  for (int peer = 0; peer < world_; ++peer) {
    const auto p = static_cast<std::size_t>(peer);
    if (peer == rank_ || !receives_[p].empty()) continue;
    const Mailbox& b = *box_(peer, rank_);
    if (b.posted.load(std::memory_order_acquire) <= b.taken.load(std::memory_order_relaxed)) {
      continue;
    }
    Pending q = any_.front();
    any_.pop_front();
    q.m.peer = peer;
    q.message = ++received_[p];
    pending_[q.handle] = peer;
    receives_[p].push_back(q);
    return true;
  }
  return false;
}

bool Mailboxes::progress() {
  bool moved = false;
  while (match_any()) moved = true;
  for (auto* queues : {&sends_, &receives_}) {
    for (auto& queue : *queues) {
      while (!queue.empty()) {
        Pending& p = queue.front();
        moved = (p.m.send ? progress_send(p) : progress_receive(p)) || moved;
        if (!done(p)) break;
        moved = true;  // completed: a direct send's acknowledgement moves no bytes here
        pending_.erase(p.handle);
        finished_[p.handle] = p.m.peer;
        queue.pop_front();
      }
    }
  }
  return moved;
}

int Mailboxes::wait(std::uint64_t handle, const Deadline& deadline) {
  // Spin while messages move, then yield, then sleep in short slices: a peer may be descheduled
  // on a machine with fewer cores than ranks.
  for (unsigned idle = 0; pending_.contains(handle);) {
    if (progress()) {
      idle = 0;
      continue;
    }
    ++idle;
    if (idle < 4096) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else if (idle < 4160) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (idle % 256 != 0) continue;
    const int peer = pending_.at(handle);
    try {
      check_peers_(peer);
    } catch (const Error&) {
      // A peer that closed (or died) right after its send completed left the message here: the
      // progress before the check may have run just before it was posted.
      if (progress()) {
        idle = 0;
        continue;
      }
      throw;
    }
    if (deadline.expired()) {
      std::vector<std::deque<Pending>> unmatched{any_};
      for (const auto* queues : {&sends_, &receives_, &unmatched}) {
        for (const auto& queue : *queues) {
          for (const auto& p : queue) {
            if (p.handle != handle) continue;
            throw Error(
                ErrorCode::kTimeout,
                fmt::format("{} did not complete within {} ms: {} {} (a {} missing "
                            "there, or one of another count, type or tag ahead of it)",
                            text(p), deadline.budget().count(),
                            peer < 0 ? std::string("no rank") : fmt::format("rank {}", peer),
                            p.m.send ? "did not receive it" : "sent nothing matching",
                            p.m.send ? "receive" : "send"));
          }
        }
      }
    }
  }
  const int peer = finished_.at(handle);
  finished_.erase(handle);
  return peer;
}

}  // namespace tpcomm::transport::shm
