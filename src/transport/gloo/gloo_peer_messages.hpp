// Point-to-point messages over Gloo's pairs (send_recv on the gloo backend). A message is a
// header (its number on the pair, count, type, tag) on one slot and its bytes on another. Sends
// go out at once (Gloo's transport moves them as the receiver posts); a receive posts its header
// receive at once and its payload receive once the header arrived and matched, so no message
// longer than its receive reaches Gloo (which would abort the process). Every wait first takes
// the headers of every receive started, in order: two ranks that both send first, then wait for
// their sends, each post the receive the other's send needs.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "tpcomm/deadline.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::transport {

class GlooPeerMessages {
 public:
  GlooPeerMessages(std::shared_ptr<gloo::Context> context, int rank, int size);
  std::uint64_t start(const PeerMessage& m);
  // Returns the message's peer (for a receive from any rank: the sender it matched).
  int wait(std::uint64_t handle, const Deadline& deadline);

 private:
  struct Header {
    std::uint64_t message;
    std::uint64_t count;
    std::int32_t tag;
    std::uint32_t type;
  };
  struct Pending {
    PeerMessage m;
    std::uint64_t handle = 0;
    std::uint64_t message = 0;       // a receive's: known once its header arrived
    std::unique_ptr<Header> header;  // sent, or received into
    std::unique_ptr<gloo::transport::UnboundBuffer> header_buffer, payload;
    bool payload_posted = false;  // a receive's, once its header matched
  };
  void take_header(Pending& p, const Deadline& deadline);
  std::size_t bytes(const Pending& p) const { return p.m.count * size_of(p.m.type); }

  std::shared_ptr<gloo::Context> context_;
  int rank_;
  std::vector<std::uint64_t> sent_, received_;  // [peer]: messages started
  std::deque<Pending> pending_;                 // in the order started
  std::vector<int> others_;                     // every rank but this one (receives from any)
  std::uint64_t next_handle_ = 1;
};

}  // namespace tpcomm::transport
