// The opening exchange of a Gloo call (gloo_opening_exchange.hpp).
#include "gloo_opening_exchange.hpp"

#include <gloo/types.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {
namespace {

// Slots of the exchange: a prefix of our own above Gloo's (0x01-0x08) and the ring
// reduce-scatter's (0x40), the call's tag below.
constexpr std::uint8_t kOpeningSlotPrefix = 0x41;

// The data a peer gets in the exchange: an all-reduce's, all-gather's or gather's input (all of
// it: the exchange sends every peer a message anyway), a reduce-scatter's or all_to_all's block
// for that peer. all_to_allv and scatter never travel inline.
std::size_t inline_bytes(const Call& c) {
  if (c.op == Op::kScatter || c.send_counts != nullptr || c.recv_counts != nullptr) {
    return ~std::size_t{0};
  }
  return c.count * size_of(c.type);
}

// Whether each peer gets its own block of the input (else all get the same).
bool per_peer_blocks(const Call& c) {
  return c.op == Op::kReduceScatter || c.op == Op::kAllToAll;
}

}  // namespace

std::size_t gloo_inline_room(int size) {
  constexpr std::size_t kTotal = std::size_t{64} * 1024, kLeast = std::size_t{4} * 1024;
  const std::size_t peers = static_cast<std::size_t>(std::max(size - 1, 1));
  return std::max(kLeast, kTotal / peers / kLeast * kLeast);
}

bool travels_inline(const Call& c, std::size_t room) {
  return inline_bytes(c) <= room;
}

std::uint8_t* OpeningExchange::message(std::vector<std::uint8_t>& all, int r) const {
  return all.data() + static_cast<std::size_t>(r) * message_bytes_;
}

// Gloo's buffers over the messages, made once (the messages never move afterwards).
void OpeningExchange::bind(gloo::Context& context) {
  if (size_ == context.size) return;
  rank_ = context.rank;
  size_ = context.size;
  message_bytes_ = sizeof(CallIdentity) + room_;
  sent_.assign(static_cast<std::size_t>(size_) * message_bytes_, 0);
  received_.assign(static_cast<std::size_t>(size_) * message_bytes_, 0);
  to_.clear();
  from_.clear();
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      to_.emplace_back();
      from_.emplace_back();
      continue;
    }
    to_.push_back(context.createUnboundBuffer(message(sent_, r), message_bytes_));
    from_.push_back(context.createUnboundBuffer(message(received_, r), message_bytes_));
  }
}

void OpeningExchange::run(gloo::Context& context, const Call& c, CallIdentity mine,
                          std::uint32_t tag, std::chrono::milliseconds timeout) {
  bind(context);
  call_ = &c;
  const bool scatter = per_peer_blocks(c);
  const std::size_t bytes = travels_inline(c, room_) ? inline_bytes(c) : 0;
  const auto* input = static_cast<const std::uint8_t*>(c.input);
  // Slot r holds the message to rank r. An all-reduce or all-gather sends every peer the same
  // message, and keeps its own slot too: its input as sent, which the all-reduce (staged in its
  // output) overwrites when it reduces.
  for (int r = 0; r < size_; ++r) {
    if (scatter && r == rank_) continue;
    std::uint8_t* m = message(sent_, r);
    std::memcpy(m, &mine, sizeof(mine));
    if (bytes > 0) {
      std::memcpy(m + sizeof(mine), scatter ? input + static_cast<std::size_t>(r) * bytes : input,
                  bytes);
    }
  }
  const std::uint64_t slot = gloo::Slot::build(kOpeningSlotPrefix, tag);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) from_[static_cast<std::size_t>(r)]->recv(r, slot);
  }
  // A message is as long as what it carries: Gloo accepts one shorter than the receive posted
  // for it (never a longer one), and the identity inside says how much data follows.
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) to_[static_cast<std::size_t>(r)]->send(r, slot, 0, sizeof(mine) + bytes);
  }
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && !from_[static_cast<std::size_t>(r)]->waitRecv(timeout)) {
      throw Error(ErrorCode::kUnavailable, "gloo: a receive was aborted");
    }
  }
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && !to_[static_cast<std::size_t>(r)]->waitSend(timeout)) {
      throw Error(ErrorCode::kUnavailable, "gloo: a send was aborted");
    }
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    CallIdentity theirs;
    std::memcpy(&theirs, message(received_, r), sizeof(theirs));
    if (!(theirs == mine)) {
      throw Error(ErrorCode::kMismatch, fmt::format("rank {} called {} but rank {} called {}", r,
                                                    describe(theirs), rank_, describe(mine)));
    }
  }
}

const void* OpeningExchange::data_from(int r) const {
  const Call& c = *call_;
  if (r == rank_ && per_peer_blocks(c)) {
    return static_cast<const std::uint8_t*>(c.input) +
           static_cast<std::size_t>(r) * inline_bytes(c);
  }
  const std::vector<std::uint8_t>& messages = r == rank_ ? sent_ : received_;
  return messages.data() + static_cast<std::size_t>(r) * message_bytes_ + sizeof(CallIdentity);
}

}  // namespace tpcomm::transport
