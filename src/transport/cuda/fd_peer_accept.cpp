// The listener's side of the fd channel's handshake: accepting, refusing and taking connections by
// their credentials and proofs, and an exchange's two sides on two threads (fd_channel_auth.hpp).
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "control/store_auth.hpp"
#include "fd_channel_auth.hpp"
#include "fd_proof_frames.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::cuda {
namespace {

// The first refusals of a listener are warnings, the rest debug lines (a flood is not a log flood).
constexpr std::size_t kLoudRefusals = 3;
// Connections accepted per wake-up, so that a flood cannot keep the loop from reading proofs.
constexpr int kAcceptsPerWake = 64;

void refuse(PendingPeers& pending, const std::string& why) {
  ++pending.refused;
  pending.last_refusal = why;
  if (pending.refused <= kLoudRefusals) {
    TPCOMM_LOG(kWarn, "cuda", "fd channel: refused a connection: {}", why);
  } else {
    TPCOMM_LOG(kDebug, "cuda", "fd channel: refused a connection: {}", why);
  }
}

void drop(PendingPeers& pending, std::size_t i, const std::string& why) {
  const PendingPeer& p = pending.connections[i];
  refuse(pending, fmt::format("pid {} uid {}: {}", p.pid, p.uid, why));
  pending.connections.erase(pending.connections.begin() + static_cast<std::ptrdiff_t>(i));
}

void drop_expired(PendingPeers& pending) {
  const auto now = Deadline::Clock::now();
  for (std::size_t i = pending.connections.size(); i-- > 0;) {
    if (pending.connections[i].until <= now) {
      drop(pending, i, fmt::format("no proof within {} ms", kProofWindow.count()));
    }
  }
}

// Accepts what the backlog holds: strangers are refused at once by their credentials, the others
// get their nonce and wait for their proof among the pending connections.
void accept_waiting(int listener, const FdChannelAuth& auth, PendingPeers& pending) {
  for (int k = 0; k < kAcceptsPerWake; ++k) {
    net::Fd c(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (c.get() < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("accepting on the fd channel: {}", net::errno_text()));
    }
    PendingPeer p;
    if (!peer_credentials(c.get(), &p.pid, &p.uid)) {
      refuse(pending, "a connection without peer credentials");
      continue;
    }
    if (std::string why = credential_refusal(auth, p.pid, p.uid, -1); !why.empty()) {
      refuse(pending, fmt::format("pid {} uid {}: {}", p.pid, p.uid, why));
      continue;
    }
    ChallengeFrame challenge;
    const Bytes nonce = control::random_nonce();
    std::memcpy(challenge.nonce.data(), nonce.data(), challenge.nonce.size());
    if (send(c.get(), &challenge, sizeof(challenge), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(sizeof(challenge))) {
      refuse(pending, fmt::format("pid {}: gone before its nonce was sent", p.pid));
      continue;
    }
    p.nonce = challenge.nonce;
    p.socket = std::move(c);
    p.until = Deadline::Clock::now() + kProofWindow;
    if (pending.connections.size() >= kMaxPendingPeers) {
      drop(pending, 0, "dropped for a newer connection (too many without a proof)");
    }
    pending.connections.push_back(std::move(p));
  }
}

std::string proof_refusal(const FdChannelAuth& auth, const PendingPeer& p, const ProofFrame& f) {
  const HandleHeader& h = f.header;
  if (h.magic != kHandleMagic || h.version != kHandleVersion) {
    return fmt::format("not an fd-channel proof of version {} (magic {:#010x}, version {})",
                       kHandleVersion, h.magic, h.version);
  }
  if (h.comm_id != auth.comm_id) return fmt::format("a proof for communicator {:016x}", h.comm_id);
  if (f.to_rank != auth.rank) return fmt::format("a proof for rank {}", f.to_rank);
  if (h.from_rank < 0 || h.from_rank >= auth.world || h.from_rank == auth.rank) {
    return fmt::format("a proof from rank {} (world {})", h.from_rank, auth.world);
  }
  const Bytes mac = header_proof(auth, p.nonce, auth.rank, h);
  if (!control::same_proof(mac, Bytes(f.mac, f.mac + sizeof(f.mac)))) {
    return fmt::format(
        "a proof for rank {}'s header made without the group's key (forged, or "
        "replayed under another nonce)",
        h.from_rank);
  }
  return credential_refusal(auth, p.pid, p.uid, h.from_rank);
}

// Reads what pending connection `i` has sent of its proof; the connection, once it is proven.
std::optional<AcceptedPeer> read_proof(const FdChannelAuth& auth, PendingPeers& pending,
                                       std::size_t i) {
  PendingPeer& p = pending.connections[i];
  std::uint8_t buffer[sizeof(ProofFrame)];
  const ssize_t n = recv(p.socket.get(), buffer, sizeof(ProofFrame) - p.got.size(), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return std::nullopt;
  if (n <= 0) {
    drop(pending, i, n == 0 ? "closed before it proved itself" : net::errno_text());
    return std::nullopt;
  }
  p.got.insert(p.got.end(), buffer, buffer + n);
  if (p.got.size() < sizeof(ProofFrame)) return std::nullopt;
  ProofFrame f;
  std::memcpy(&f, p.got.data(), sizeof(f));
  if (std::string why = proof_refusal(auth, p, f); !why.empty()) {
    drop(pending, i, why);
    return std::nullopt;
  }
  AcceptedPeer out{std::move(p.socket), f.header};
  pending.connections.erase(pending.connections.begin() + static_cast<std::ptrdiff_t>(i));
  return out;
}

bool is_timeout(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& error) {
    return error.code() == ErrorCode::kTimeout;
  } catch (...) {
    return false;
  }
}

}  // namespace

AcceptedPeer accept_peer(int listener, const FdChannelAuth& auth, PendingPeers& pending,
                         const Deadline& deadline, const std::string& waiting_for,
                         const std::atomic<bool>* stop) {
  net::set_nonblocking(listener);
  std::vector<pollfd> fds;
  while (true) {
    drop_expired(pending);
    if (deadline.expired()) {
      throw Error(ErrorCode::kTimeout,
                  pending.refused == 0
                      ? fmt::format("{} before the deadline", waiting_for)
                      : fmt::format("{} before the deadline ({} connection(s) refused; the last: "
                                    "{})",
                                    waiting_for, pending.refused, pending.last_refusal));
    }
    if (stop != nullptr && stop->load()) throw ChannelStopped{};
    fds.assign(1, pollfd{listener, POLLIN, 0});
    for (const PendingPeer& p : pending.connections) fds.push_back({p.socket.get(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), deadline.poll_ms(100)) <= 0) continue;
    // Proofs first, newest first (erasing one keeps the indices below it): a peer already waiting
    // is not kept behind new connections.
    for (std::size_t i = fds.size() - 1; i >= 1; --i) {
      if (fds[i].revents == 0) continue;
      if (auto peer = read_proof(auth, pending, i - 1)) return std::move(*peer);
    }
    if (fds[0].revents != 0) accept_waiting(listener, auth, pending);
  }
}

void send_while_receiving(const std::function<void(const std::atomic<bool>& stop)>& send,
                          const std::function<void(const std::atomic<bool>& stop)>& receive) {
  std::atomic<bool> stop{false};
  std::exception_ptr send_error, receive_error;
  auto run = [&stop](const std::function<void(const std::atomic<bool>&)>& side,
                     std::exception_ptr& error) {
    try {
      side(stop);
    } catch (const ChannelStopped&) {
      // the other side failed first and reports it
    } catch (...) {
      error = std::current_exception();
      stop = true;
    }
  };
  std::thread sender([&] { run(send, send_error); });
  run(receive, receive_error);
  sender.join();
  if (send_error && receive_error && is_timeout(send_error) && !is_timeout(receive_error)) {
    std::rethrow_exception(receive_error);
  }
  if (send_error) std::rethrow_exception(send_error);
  if (receive_error) std::rethrow_exception(receive_error);
}

}  // namespace tpcomm::transport::cuda
