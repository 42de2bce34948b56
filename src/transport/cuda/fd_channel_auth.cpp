// The group's record on the fd channel (pids, listeners, key), the proofs, and the sender's side of
// the handshake (fd_channel_auth.hpp).
#include "fd_channel_auth.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "control/store_auth.hpp"
#include "fd_channel.hpp"
#include "fd_proof_frames.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::cuda {
namespace {

constexpr std::uint32_t kRecordMagic = 0x41465054;  // "TPFA"
constexpr std::size_t kShareBytes = 32;

Bytes hmac_sha256(const Bytes& key, const Bytes& message) {
  Bytes out(EVP_MAX_MD_SIZE);
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(),
           out.data(), &length) == nullptr) {
    throw Error(ErrorCode::kInternal, "HMAC-SHA256 failed in OpenSSL (fd channel)");
  }
  out.resize(length);
  return out;
}

// resize + memcpy, not insert: GCC 12 at -O3 reports a false stringop-overflow in
// vector::insert of a few bytes (-Werror).
template <typename T>
void put(Bytes& out, const T& value) {
  const std::size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

// Reads the published record of one rank, checking every length.
struct RecordReader {
  const Bytes& bytes;
  int rank;
  std::size_t at = 0;
  void take(void* out, std::size_t n) {
    if (bytes.size() - at < n) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("rank {} published a {}-byte fd-channel record, too short (mixed "
                              "tpcomm versions?)",
                              rank, bytes.size()));
    }
    std::memcpy(out, bytes.data() + at, n);
    at += n;
  }
  template <typename T>
  T get() {
    T value;
    take(&value, sizeof(T));
    return value;
  }
};

std::uint64_t own_pid_namespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

// Reads exactly one challenge from a sender's socket.
ChallengeFrame read_challenge(int s, const Deadline& deadline, const std::atomic<bool>* stop,
                              const std::string& who) {
  ChallengeFrame frame;
  auto* p = reinterpret_cast<std::uint8_t*>(&frame);
  std::size_t have = 0;
  while (have < sizeof(frame)) {
    if (deadline.expired()) {
      throw Error(ErrorCode::kTimeout,
                  fmt::format("{} accepted no connection before the deadline", who));
    }
    if (stop != nullptr && stop->load()) throw ChannelStopped{};
    pollfd q{s, POLLIN, 0};
    if (poll(&q, 1, deadline.poll_ms(100)) <= 0) continue;
    const ssize_t n = recv(s, p + have, sizeof(frame) - have, MSG_DONTWAIT);
    if (n == 0) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("{} closed the connection before sending its nonce", who));
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("reading the nonce of {}: {}", who, net::errno_text()));
    }
    if (n > 0) have += static_cast<std::size_t>(n);
  }
  return frame;
}

}  // namespace

FdListener listen_fd_channel(std::uint64_t comm_id, int rank) {
  const Bytes random = control::random_nonce();
  std::uint64_t suffix;
  std::memcpy(&suffix, random.data(), sizeof(suffix));
  FdListener out;
  out.name = fmt::format("{}-{:016x}", listener_name(comm_id, rank), suffix);
  out.socket = listen_abstract(out.name);
  return out;
}

FdChannelAuth agree_fd_channel(Bootstrap& bootstrap, std::uint64_t comm_id,
                               const std::string& listener, const Deadline& deadline) {
  FdChannelAuth auth;
  auth.comm_id = comm_id;
  auth.rank = bootstrap.rank();
  auth.world = bootstrap.size();
  auth.uid = geteuid();
  auth.pid_namespace = own_pid_namespace();
  const Bytes share = control::random_nonce();
  Bytes mine;
  put(mine, kRecordMagic);
  put(mine, static_cast<std::uint32_t>(kHandleVersion));
  put(mine, static_cast<std::int32_t>(getpid()));
  put(mine, auth.pid_namespace);
  mine.insert(mine.end(), share.begin(), share.begin() + kShareBytes);
  put(mine, static_cast<std::uint16_t>(listener.size()));
  mine.insert(mine.end(), listener.begin(), listener.end());
  const std::vector<Bytes> all = bootstrap.all_gather(mine, "fd channel peers", deadline);
  Bytes shares;
  for (int p = 0; p < auth.world; ++p) {
    RecordReader r{all.at(static_cast<std::size_t>(p)), p};
    if (r.get<std::uint32_t>() != kRecordMagic || r.get<std::uint32_t>() != kHandleVersion) {
      throw Error(
          ErrorCode::kMismatch,
          fmt::format("rank {} published an fd-channel record of another tpcomm version", p));
    }
    FdChannelPeer peer;
    peer.pid = static_cast<pid_t>(r.get<std::int32_t>());
    peer.pid_namespace = r.get<std::uint64_t>();
    shares.resize(shares.size() + kShareBytes);
    r.take(shares.data() + shares.size() - kShareBytes, kShareBytes);
    peer.listener.resize(r.get<std::uint16_t>());
    r.take(peer.listener.data(), peer.listener.size());
    auth.peers.push_back(std::move(peer));
  }
  Bytes label{'t', 'p', 'c', 'o', 'm', 'm', '-', 'f', 'd', '-', 'k', 'e', 'y'};
  put(label, comm_id);
  auth.key = hmac_sha256(shares, label);
  return auth;
}

Bytes header_proof(const FdChannelAuth& auth, const ProofNonce& nonce, int to_rank,
                   const HandleHeader& header) {
  const std::string_view label = "tpcomm-fd-proof";
  Bytes message(label.begin(), label.end());
  message.insert(message.end(), nonce.begin(), nonce.end());
  put(message, static_cast<std::int32_t>(to_rank));
  put(message, header);
  return hmac_sha256(auth.key, message);
}

bool peer_credentials(int socket, pid_t* pid, uid_t* uid) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  *pid = cred.pid;
  *uid = cred.uid;
  return true;
}

std::string credential_refusal(const FdChannelAuth& auth, pid_t pid, uid_t uid, int rank) {
  if (uid != auth.uid) return fmt::format("uid {} is not this rank's ({})", uid, auth.uid);
  auto comparable = [&](const FdChannelPeer& p) {
    return p.pid_namespace == auth.pid_namespace || p.pid_namespace == 0 || auth.pid_namespace == 0;
  };
  if (rank >= 0) {
    const FdChannelPeer& p = auth.peers.at(static_cast<std::size_t>(rank));
    if (!comparable(p) || p.pid == pid) return "";
    return fmt::format("pid {} is not rank {}'s ({})", pid, rank, p.pid);
  }
  for (const FdChannelPeer& p : auth.peers) {
    if (!comparable(p) || p.pid == pid) return "";
  }
  return fmt::format("pid {} is no rank's of this group", pid);
}

net::Fd connect_peer(const FdChannelAuth& auth, int to_rank, const HandleHeader& header,
                     const Deadline& deadline, const std::atomic<bool>* stop) {
  const FdChannelPeer& peer = auth.peers.at(static_cast<std::size_t>(to_rank));
  const std::string who = fmt::format("rank {} (@{})", to_rank, peer.listener);
  net::Fd s = connect_abstract(peer.listener, deadline, stop);
  pid_t pid = 0;
  uid_t uid = 0;
  if (!peer_credentials(s.get(), &pid, &uid)) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("no peer credentials for {}: {}", who, net::errno_text()));
  }
  if (std::string why = credential_refusal(auth, pid, uid, to_rank); !why.empty()) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("the listener of {} belongs to another process ({}); nothing was sent "
                            "to it",
                            who, why));
  }
  const ChallengeFrame challenge = read_challenge(s.get(), deadline, stop, who);
  if (challenge.magic != kChallengeMagic || challenge.version != kHandleVersion) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("{} answered with fd-channel version {} (magic {:#010x}); this tpcomm "
                            "speaks {} (mixed tpcomm versions in one group?)",
                            who, challenge.version, challenge.magic, kHandleVersion));
  }
  ProofFrame proof;
  proof.header = header;
  proof.to_rank = to_rank;
  const Bytes mac = header_proof(auth, challenge.nonce, to_rank, header);
  std::memcpy(proof.mac, mac.data(), sizeof(proof.mac));
  if (send(s.get(), &proof, sizeof(proof), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(proof))) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("sending the proof to {}: {}", who, net::errno_text()));
  }
  return s;
}

void require_proven(const HandleHeader& got, const HandleHeader& proven) {
  if (std::memcmp(&got, &proven, sizeof(got)) != 0) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("rank {} proved a message header (kind {}, round {}, {} bytes) and "
                            "sent another (rank {}, kind {}, round {}, {} bytes)",
                            proven.from_rank, proven.kind, proven.tag, proven.bytes, got.from_rank,
                            got.kind, got.tag, got.bytes));
  }
}

}  // namespace tpcomm::transport::cuda
