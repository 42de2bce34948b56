// SCM_RIGHTS messages with a checked header, and the exchanges of one node over proven
// connections (fd_channel_auth.hpp).
#include "fd_channel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fd_proof_frames.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::cuda {

bool wait_ready(int fd, short events, const Deadline& deadline) {
  while (true) {
    const auto left = deadline.remaining();
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

namespace {

sockaddr_un abstract_address(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL, then the name (not NUL-terminated).
  const std::size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

// One header-sized data part plus room for one descriptor: the shape of every message.
struct HandleMessage {
  iovec iov;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  explicit HandleMessage(HandleHeader* header) : iov{header, sizeof(HandleHeader)} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  HandleMessage(const HandleMessage&) = delete;
  HandleMessage& operator=(const HandleMessage&) = delete;
};

}  // namespace

void send_handle(int socket, const HandleHeader& header, int fd, const Deadline& deadline) {
  HandleHeader copy = header;
  HandleMessage m(&copy);
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (!wait_ready(socket, POLLOUT, deadline)) {
    throw Error(ErrorCode::kTimeout, "sending a workspace handle: the peer did not accept in time");
  }
  if (sendmsg(socket, &m.msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(header))) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("sending a workspace handle: {}", net::errno_text()));
  }
}

ReceivedHandle receive_handle(int socket, std::uint64_t expected_comm, const Deadline& deadline,
                              const std::string& from) {
  ReceivedHandle out;
  HandleMessage m(&out.header);
  if (!wait_ready(socket, POLLIN, deadline)) {
    throw Error(ErrorCode::kTimeout,
                fmt::format("no workspace handle from {} within the deadline", from));
  }
  const ssize_t n = recvmsg(socket, &m.msg, MSG_CMSG_CLOEXEC);
  // Take ownership of any descriptor first, so that every error path closes it.
  for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c != nullptr; c = CMSG_NXTHDR(&m.msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      out.fd = net::Fd(fd);
    }
  }
  if (n < 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("receiving a workspace handle from {}: {}", from, net::errno_text()));
  }
  if (n != static_cast<ssize_t>(sizeof(HandleHeader))) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("workspace handle from {}: {} bytes, expected a {}-byte header", from,
                            n, sizeof(HandleHeader)));
  }
  const HandleHeader& h = out.header;
  if (h.magic != kHandleMagic) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("workspace handle from {}: bad magic {:#010x} (not a tpcomm peer)",
                            from, h.magic));
  }
  if (h.version != kHandleVersion) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("workspace handle from {}: version {}, this tpcomm speaks {} "
                            "(mixed tpcomm versions in one group?)",
                            from, h.version, kHandleVersion));
  }
  if (h.comm_id != expected_comm) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("workspace handle from {}: communicator {:016x}, expected {:016x} "
                            "(a connection from another group)",
                            from, h.comm_id, expected_comm));
  }
  if (out.fd.get() < 0) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("workspace handle from {}: the message carried no descriptor", from));
  }
  return out;
}

std::string listener_name(std::uint64_t comm_id, int rank) {
  return fmt::format("tpcomm-fd-{:016x}-{}", comm_id, rank);
}

net::Fd listen_abstract(const std::string& name) {
  net::Fd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  socklen_t len;
  sockaddr_un a = abstract_address(name, &len);
  if (s.get() < 0 || bind(s.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      listen(s.get(), kListenBacklog) != 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("cannot listen on unix socket @{}: {}", name, net::errno_text()));
  }
  return s;
}

net::Fd connect_abstract(const std::string& name, const Deadline& deadline,
                         const std::atomic<bool>* stop) {
  socklen_t len;
  sockaddr_un a = abstract_address(name, &len);
  while (true) {
    // Non-blocking: a backlog filled by strangers is EAGAIN, retried, not a connect(2) that
    // blocks past the deadline.
    net::Fd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (connect(s.get(), reinterpret_cast<sockaddr*>(&a), len) == 0) {
      fcntl(s.get(), F_SETFL, fcntl(s.get(), F_GETFL, 0) & ~O_NONBLOCK);
      return s;
    }
    // The deadline first: a side stopped at the deadline reports its own timeout.
    if (deadline.expired()) {
      throw Error(ErrorCode::kTimeout,
                  fmt::format("cannot connect to unix socket @{}: {}", name, net::errno_text()));
    }
    if (stop != nullptr && stop->load()) throw ChannelStopped{};
    usleep(1000);
  }
}

net::Fd broadcast_handle(const FdChannelAuth& auth, int root, int listener, int root_fd,
                         std::uint64_t bytes, const Deadline& deadline) {
  if (auth.rank == root) {
    HandleHeader h;
    h.from_rank = auth.rank;
    h.comm_id = auth.comm_id;
    h.bytes = bytes;
    for (int p = 0; p < auth.world; ++p) {
      if (p == auth.rank) continue;
      net::Fd s = connect_peer(auth, p, h, deadline);
      send_handle(s.get(), h, root_fd, deadline);
    }
    return net::Fd();
  }
  PendingPeers pending;
  AcceptedPeer peer = accept_peer(listener, auth, pending, deadline,
                                  fmt::format("rank {} did not send its handle", root));
  if (peer.header.from_rank != root) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("expected the handle of rank {}, got one from rank {}", root,
                            peer.header.from_rank));
  }
  ReceivedHandle h =
      receive_handle(peer.socket.get(), auth.comm_id, deadline, fmt::format("rank {}", root));
  require_proven(h.header, peer.header);
  return std::move(h.fd);
}

std::vector<net::Fd> exchange_handles(const FdChannelAuth& auth, int listener, int my_fd,
                                      std::uint64_t bytes, const Deadline& deadline) {
  const int world = auth.world;
  std::vector<net::Fd> out(static_cast<std::size_t>(world));
  HandleHeader mine;
  mine.from_rank = auth.rank;
  mine.comm_id = auth.comm_id;
  mine.bytes = bytes;
  std::vector<net::Fd> sent;
  auto send_all = [&](const std::atomic<bool>& stop) {
    for (int p = 0; p < world; ++p) {
      if (p == auth.rank) continue;
      net::Fd s = connect_peer(auth, p, mine, deadline, &stop);
      send_handle(s.get(), mine, my_fd, deadline);
      sent.push_back(std::move(s));
    }
  };
  auto receive_all = [&](const std::atomic<bool>& stop) {
    PendingPeers pending;
    for (int got = 0; got < world - 1; ++got) {
      AcceptedPeer peer = accept_peer(
          listener, auth, pending, deadline,
          fmt::format("{} of {} peers sent their workspace handle", got, world - 1), &stop);
      const int from = peer.header.from_rank;
      if (out[static_cast<std::size_t>(from)].get() >= 0) {
        throw Error(ErrorCode::kMismatch,
                    fmt::format("rank {} sent its workspace handle twice", from));
      }
      ReceivedHandle h =
          receive_handle(peer.socket.get(), auth.comm_id, deadline, fmt::format("rank {}", from));
      require_proven(h.header, peer.header);
      out[static_cast<std::size_t>(from)] = std::move(h.fd);
    }
  };
  send_while_receiving(send_all, receive_all);
  return out;
}

}  // namespace tpcomm::transport::cuda
