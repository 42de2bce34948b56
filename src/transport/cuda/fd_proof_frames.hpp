// The two frames that open every connection of the fd channel (fd_channel_auth.hpp), and the
// credential rule both ends apply. Internal to fd_channel_auth.cpp and fd_peer_accept.cpp.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "fd_channel_auth.hpp"

namespace tpcomm::transport::cuda {

// Thrown by a wait that was told to stop (send_while_receiving: the other side failed first).
struct ChannelStopped {};

constexpr std::uint32_t kChallengeMagic = 0x43465054;  // "TPFC"

// Listener -> sender, right after accept: the nonce the sender's proof must cover.
struct ChallengeFrame {
  std::uint32_t magic = kChallengeMagic;
  std::uint32_t version = kHandleVersion;
  ProofNonce nonce{};
};
static_assert(sizeof(ChallengeFrame) == 40);

// Sender -> listener: the header of the message that follows, and its HMAC (header_proof).
struct ProofFrame {
  HandleHeader header;
  std::int32_t to_rank = 0;
  std::uint32_t reserved = 0;
  std::uint8_t mac[32] = {};
};
static_assert(sizeof(ProofFrame) == 72);

// Why a process with these credentials may not speak for `rank` on the channel (any rank of the
// group when rank < 0), or empty: the uid must be ours, and the pid the rank's where the rank
// shares our pid namespace (a pid from another namespace cannot be compared).
std::string credential_refusal(const FdChannelAuth& auth, pid_t pid, uid_t uid, int rank);

// SO_PEERCRED of a connected Unix socket; false when the kernel gives none.
bool peer_credentials(int socket, pid_t* pid, uid_t* uid);

}  // namespace tpcomm::transport::cuda
