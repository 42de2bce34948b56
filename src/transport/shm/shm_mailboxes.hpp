// Point-to-point messages through the segment's mailboxes (shm_layout.hpp): the messages a rank
// started, each progressed chunk by chunk whenever any of them is waited for, so that two ranks
// that both send first (torch's batch_isend_irecv) never wait on each other: a wait moves every
// pending message to and from every peer, in the order started per peer and direction.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "shm_layout.hpp"
#include "tpcomm/deadline.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::transport::shm {

class Mailboxes {
 public:
  // `box(from, to)`: the mailbox from rank `from` to rank `to`. `check_peers` throws when a peer
  // aborted, closed or died (called while a wait waits).
  // `read_peer(peer, address, to, bytes)`: a single-copy read of a peer's memory, or null where
  // the set-up vote refused them: messages of at least kDirectMessageBytes are then read where
  // they lie in the sender's buffer instead of going through the ring.
  using ReadPeer = std::function<void(int, std::uint64_t, void*, std::size_t)>;
  Mailboxes(std::function<Mailbox*(int, int)> box, int rank, int world,
            std::function<void(int peer)> check_peers, ReadPeer read_peer);

  std::uint64_t start(const PeerMessage& m);
  // Returns the message's peer (for a receive from any rank: the sender it matched).
  int wait(std::uint64_t handle, const Deadline& deadline);

 private:
  struct Pending {
    PeerMessage m;
    std::uint64_t handle = 0;
    std::uint64_t message = 0;  // the pair's message number
    std::size_t moved = 0;      // bytes written (send) or read (receive) so far
    bool any_chunk = false;     // a message of no bytes still takes one chunk
    std::uint64_t ack = 0;      // a direct send: done once the receiver's taken reaches this
  };
  bool done(const Pending& p) const;
  // Moves what it can of the first pending message of each queue; true if anything moved or
  // completed.
  bool progress();
  // Gives the first receive from any rank the first rank with a message waiting and no receive
  // of its own queued ahead; true if one was matched.
  bool match_any();
  bool progress_send(Pending& p);
  bool progress_receive(Pending& p);
  std::string text(const Pending& p) const;

  std::function<Mailbox*(int, int)> box_;
  int rank_;
  int world_;
  std::function<void(int)> check_peers_;
  ReadPeer read_peer_;
  std::vector<std::deque<Pending>> sends_, receives_;  // [peer]
  std::deque<Pending> any_;                            // receives from any rank, unmatched
  std::vector<std::uint64_t> sent_, received_;         // [peer]: messages started so far
  std::vector<std::uint64_t> posted_;                  // [peer]: chunks written to its mailbox
  std::map<std::uint64_t, int> pending_;               // handle -> peer (-1: any), until completed
  std::map<std::uint64_t, int> finished_;  // handle -> peer, completed and not waited for
  std::uint64_t next_handle_ = 1;
};

}  // namespace tpcomm::transport::shm
