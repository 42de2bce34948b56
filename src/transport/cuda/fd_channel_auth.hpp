// Who may speak on a communicator's fd channel, and how a connection proves it
// (docs/gpu-kernels.md, "Who may speak on the fd channel"). The listeners are abstract-namespace
// Unix sockets: no file permissions guard them, and every user of the network namespace can read
// their names in /proc/net/unix and connect. So:
//  - a listener's name ends in 64 random bits that only the group learns (through its bootstrap),
//    so nobody can bind a rank's name before the rank does;
//  - at set-up every rank publishes through the bootstrap its pid, its pid namespace, its
//    listener's name and 32 random bytes; the channel key is an HMAC-SHA256 over all the random
//    bytes, so it never crosses the fd channel and differs for every communicator;
//  - a listener checks SO_PEERCRED on every connection it accepts (the uid must be ours, the pid
//    one of the group's), sends it a fresh nonce, and takes it only when it answers, within
//    kProofWindow, with the header of the message it will send and
//    HMAC(key, "tpcomm-fd-proof" | nonce | receiving rank | header). Anything else is refused:
//    closed, logged, never counted, so the real peer's message still arrives. Connections that have
//    not answered yet wait side by side (PendingPeers), so a silent one delays nobody;
//  - a sender checks SO_PEERCRED of the listener it reached (our uid, the rank's pid) before it
//    sends anything.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "control/socket_util.hpp"
#include "fd_handle_header.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/deadline.hpp"

namespace tpcomm::transport::cuda {

// How long an accepted connection has to prove itself before it is dropped.
constexpr std::chrono::milliseconds kProofWindow{3000};
// Connections that have not proved themselves yet, at most (the oldest is dropped for a new one).
constexpr std::size_t kMaxPendingPeers = 64;

struct FdChannelPeer {
  pid_t pid = 0;
  std::uint64_t pid_namespace = 0;  // pids compare only within one pid namespace
  std::string listener;             // its listener's abstract name
};

// What a rank knows of its group on the fd channel: agreed once at set-up, then read-only.
struct FdChannelAuth {
  std::uint64_t comm_id = 0;  // the channel's id (in every header)
  int rank = 0;
  int world = 1;
  uid_t uid = 0;                     // every peer's uid must be this rank's
  std::uint64_t pid_namespace = 0;   // this rank's
  std::vector<FdChannelPeer> peers;  // by rank
  Bytes key;                         // 32 bytes, the group's
};

struct FdListener {
  net::Fd socket;
  std::string name;  // "tpcomm-fd-<comm>-<rank>-<64 random bits>" in the abstract namespace
};
// Listens for `rank` of channel `comm_id` under a fresh random name.
FdListener listen_fd_channel(std::uint64_t comm_id, int rank);

// Collective over `bootstrap` (every rank of the group calls it): publishes this rank's pid, pid
// namespace, `listener` name and key share, and returns the group's record with the channel key.
FdChannelAuth agree_fd_channel(Bootstrap& bootstrap, std::uint64_t comm_id,
                               const std::string& listener, const Deadline& deadline);

using ProofNonce = std::array<std::uint8_t, 32>;
// HMAC-SHA256(auth.key, "tpcomm-fd-proof" | nonce | to_rank | header): what a sender answers.
Bytes header_proof(const FdChannelAuth& auth, const ProofNonce& nonce, int to_rank,
                   const HandleHeader& header);

// Connects to rank `to_rank`'s listener, checks that the listener is that rank's process, and
// proves `header` (the header of the message the caller sends next on the returned socket).
// Throws kMismatch when the listener is another process's, kTimeout or kUnavailable when the
// rank does not answer by the deadline or `stop` is set.
net::Fd connect_peer(const FdChannelAuth& auth, int to_rank, const HandleHeader& header,
                     const Deadline& deadline, const std::atomic<bool>* stop = nullptr);

// The connections one listener accepted that have not proved themselves yet; it lives as long as
// the listener (or one exchange, where nothing else is sent to the listener), so that a peer that
// connected for a later round is not lost when this round ends.
struct PendingPeer {
  net::Fd socket;
  ProofNonce nonce{};
  pid_t pid = 0;
  uid_t uid = 0;
  Deadline::Clock::time_point until;
  std::vector<std::uint8_t> got;  // the proof's bytes so far
};
struct PendingPeers {
  std::vector<PendingPeer> connections;
  std::size_t refused = 0;   // connections refused so far (logged, the first few as warnings)
  std::string last_refusal;  // why the last one was (named in a timeout's error)
};

// One connection that proved itself: its socket, positioned at the message it proved.
struct AcceptedPeer {
  net::Fd socket;
  HandleHeader header;  // as proven: header.from_rank is the peer's rank
};

// Accepts connections on `listener` until one proves itself, refusing the others (closed, logged,
// not counted). Throws kTimeout "<waiting_for> before the deadline" (with the refusals seen) or
// kUnavailable when `stop` is set.
AcceptedPeer accept_peer(int listener, const FdChannelAuth& auth, PendingPeers& pending,
                         const Deadline& deadline, const std::string& waiting_for,
                         const std::atomic<bool>* stop = nullptr);

// A message received on a proven connection must carry the header it proved; kMismatch if not.
void require_proven(const HandleHeader& got, const HandleHeader& proven);

// Runs `send` on a thread of its own while `receive` runs on the caller's: a sender waits for its
// peer's nonce, so two ranks sending to each other must also be accepting. When one side fails
// the other is stopped; the first failure that is not a timeout is rethrown, else the send's
// (which names the listener it could not reach), else the receive's.
void send_while_receiving(const std::function<void(const std::atomic<bool>& stop)>& send,
                          const std::function<void(const std::atomic<bool>& stop)>& receive);

}  // namespace tpcomm::transport::cuda
