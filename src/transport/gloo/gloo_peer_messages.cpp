// Point-to-point messages over Gloo's pairs (gloo_peer_messages.hpp).
#include "gloo_peer_messages.hpp"

#include <gloo/types.h>

#include <algorithm>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {
namespace {

// Our slots' prefixes, beside the opening exchange's (0x41) and above Gloo's own.
const std::uint64_t kHeaderSlot = gloo::Slot::build(0x43, 0);
const std::uint64_t kPayloadSlot = gloo::Slot::build(0x44, 0);

std::chrono::milliseconds left(const Deadline& d) {
  return std::max(std::chrono::milliseconds(1), d.remaining());
}

std::string text(const PeerMessage& m) {
  return fmt::format("{}({} x {}, tag {}) {} rank {} #{}", m.send ? "send" : "recv",
                     to_string(m.type), m.count, m.tag, m.send ? "to" : "from", m.peer, m.sequence);
}

}  // namespace

GlooPeerMessages::GlooPeerMessages(std::shared_ptr<gloo::Context> context, int rank, int size)
    : context_(std::move(context)),
      rank_(rank),
      sent_(static_cast<std::size_t>(size)),
      received_(static_cast<std::size_t>(size)) {
  for (int r = 0; r < size; ++r) {
    if (r != rank) others_.push_back(r);
  }
}

std::uint64_t GlooPeerMessages::start(const PeerMessage& m) {
  Pending p;
  p.m = m;
  p.handle = next_handle_++;
  // A receive numbers its message when the header arrives (a receive from any rank learns its
  // sender then); headers of one pair arrive in order, and are taken in the order started.
  if (m.send) p.message = ++sent_[static_cast<std::size_t>(m.peer)];
  p.header = std::make_unique<Header>(
      Header{p.message, m.count, m.tag, static_cast<std::uint32_t>(m.type)});
  p.header_buffer = context_->createUnboundBuffer(p.header.get(), sizeof(Header));
  if (m.send) {
    p.header_buffer->send(m.peer, kHeaderSlot);
    if (bytes(p) > 0) {
      p.payload = context_->createUnboundBuffer(m.buffer, bytes(p));
      p.payload->send(m.peer, kPayloadSlot);
    }
  } else if (m.peer < 0) {
    p.header_buffer->recv(others_, kHeaderSlot);
  } else {
    p.header_buffer->recv(m.peer, kHeaderSlot);
  }
  pending_.push_back(std::move(p));
  return pending_.back().handle;
}

void GlooPeerMessages::take_header(Pending& p, const Deadline& deadline) {
  int sender = p.m.peer;
  if (!p.header_buffer->waitRecv(&sender, left(deadline))) {
    throw Error(ErrorCode::kAborted, fmt::format("gloo: {} was aborted", text(p.m)));
  }
  p.m.peer = sender;
  p.message = ++received_[static_cast<std::size_t>(sender)];
  const Header& h = *p.header;
  if (h.message != p.message || h.count != p.m.count || h.tag != p.m.tag ||
      h.type != static_cast<std::uint32_t>(p.m.type)) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("rank {} sent send({} x {}, tag {}) as its message {} to rank {}, but "
                            "rank {} receives {}",
                            p.m.peer, to_string(static_cast<DataType>(h.type)), h.count, h.tag,
                            h.message, rank_, rank_, text(p.m)));
  }
  if (bytes(p) > 0) {
    p.payload = context_->createUnboundBuffer(p.m.buffer, bytes(p));
    p.payload->recv(p.m.peer, kPayloadSlot);
  }
  p.payload_posted = true;
}

int GlooPeerMessages::wait(std::uint64_t handle, const Deadline& deadline) {
  for (Pending& p : pending_) {
    if (!p.m.send && !p.payload_posted) take_header(p, deadline);
  }
  const auto it = std::find_if(pending_.begin(), pending_.end(),
                               [&](const Pending& p) { return p.handle == handle; });
  if (it == pending_.end()) throw Error(ErrorCode::kInternal, "gloo: no such message");
  Pending& p = *it;
  bool done = true;
  if (p.m.send) {
    done = p.header_buffer->waitSend(nullptr, left(deadline)) &&
           (!p.payload || p.payload->waitSend(nullptr, left(deadline)));
  } else if (p.payload) {
    done = p.payload->waitRecv(nullptr, left(deadline));
  }
  if (!done) throw Error(ErrorCode::kAborted, fmt::format("gloo: {} was aborted", text(p.m)));
  const int peer = p.m.peer;
  pending_.erase(it);
  return peer;
}

}  // namespace tpcomm::transport
