// The first step of every Gloo call: each rank sends every peer its call's identity, and, when
// the data a peer needs is small, that data too, so a small call is over after one message each
// way (it used to take an all-gather of identities, then Gloo's collective: three network
// latencies for two ranks, five for three).
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/common/backend.hpp"
#include "transport/common/call_identity.hpp"

namespace tpcomm::transport {

// Data per peer that travels with the identity in a group of `size` ranks (an all-reduce's or
// all-gather's input, a reduce-scatter's block): 64 KiB over the peers, at least 4 KiB each, so
// a rank sends at most about 64 KiB in the exchange whatever the group's size. Every receive
// has that room, whatever the call: Gloo aborts the process when a message is longer than the
// receive posted for it, and ranks whose calls differ (the mismatch this exchange exists to
// catch) must not be able to send each other more than that; a message carries only its
// identity and its data.
std::size_t gloo_inline_room(int size);

// Whether `c`'s data travels in an opening exchange with `room` bytes per peer (the same answer
// on every rank whose call matches).
bool travels_inline(const Call& c, std::size_t room);

// One message per rank and Gloo's buffers over them, kept from call to call.
class OpeningExchange {
 public:
  // `room`: gloo_inline_room(size), or 0 for identities alone; the same on every rank.
  explicit OpeningExchange(std::size_t room) : room_(room) {}

  // Sends each peer this rank's identity (and, for an inline call, its input, or for a
  // reduce-scatter the peer's block of it) and receives theirs, all at once. Throws kMismatch
  // when a peer's call differs, naming both; gloo::IoException on a timeout or a dead peer.
  void run(gloo::Context& context, const Call& c, CallIdentity mine, std::uint32_t tag,
           std::chrono::milliseconds timeout);
  std::size_t room() const { return room_; }
  // Rank r's data for this rank after run() (this rank's own: what it sent, or for a
  // reduce-scatter its block of its input).
  const void* data_from(int r) const;

 private:
  std::uint8_t* message(std::vector<std::uint8_t>& all, int r) const;
  void bind(gloo::Context& context);

  std::size_t room_;
  const Call* call_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
  std::size_t message_bytes_ = 0;       // identity and room, the same on every rank
  std::vector<std::uint8_t> sent_;      // [r]: the message to rank r
  std::vector<std::uint8_t> received_;  // [r]: rank r's message
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> to_, from_;  // [r], none for self
};

}  // namespace tpcomm::transport
