// SCM_RIGHTS messages with a checked header, and the all-to-all exchange of one node.
#include "fd_channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "cuda_layout.hpp"
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
      listen(s.get(), kMaxRanks) != 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("cannot listen on unix socket @{}: {}", name, net::errno_text()));
  }
  return s;
}

net::Fd connect_abstract(const std::string& name, const Deadline& deadline) {
  socklen_t len;
  sockaddr_un a = abstract_address(name, &len);
  while (true) {
    net::Fd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (connect(s.get(), reinterpret_cast<sockaddr*>(&a), len) == 0) return s;
    if (deadline.expired()) {
      throw Error(ErrorCode::kTimeout,
                  fmt::format("cannot connect to unix socket @{}: {}", name, net::errno_text()));
    }
    usleep(1000);
  }
}

namespace {

// Accepts one connection on `listener` and receives its checked message.
ReceivedHandle accept_handle(int listener, std::uint64_t comm_id, const Deadline& deadline,
                             const std::string& waiting_for) {
  if (!wait_ready(listener, POLLIN, deadline)) {
    throw Error(ErrorCode::kTimeout, fmt::format("{} before the deadline", waiting_for));
  }
  net::Fd c(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (c.get() < 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("accepting a workspace handle: {}", net::errno_text()));
  }
  return receive_handle(c.get(), comm_id, deadline, "a peer");
}

}  // namespace

net::Fd broadcast_handle(int rank, int world, int root, std::uint64_t comm_id, int listener,
                         int root_fd, std::uint64_t bytes, const Deadline& deadline) {
  if (rank == root) {
    HandleHeader h;
    h.from_rank = rank;
    h.comm_id = comm_id;
    h.bytes = bytes;
    for (int p = 0; p < world; ++p) {
      if (p == rank) continue;
      net::Fd s = connect_abstract(listener_name(comm_id, p), deadline);
      send_handle(s.get(), h, root_fd, deadline);
    }
    return net::Fd();
  }
  ReceivedHandle h = accept_handle(listener, comm_id, deadline,
                                   fmt::format("rank {} did not send its handle", root));
  if (h.header.from_rank != root) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("expected the handle of rank {}, got one from rank {}", root,
                            h.header.from_rank));
  }
  return std::move(h.fd);
}

std::vector<net::Fd> exchange_handles(int rank, int world, std::uint64_t comm_id, int listener,
                                      int my_fd, std::uint64_t bytes, const Deadline& deadline) {
  std::vector<net::Fd> out(static_cast<std::size_t>(world));
  HandleHeader mine;
  mine.from_rank = rank;
  mine.comm_id = comm_id;
  mine.bytes = bytes;
  // Connections are one-way (sender connects), so sends never wait on this rank's receives.
  std::vector<net::Fd> sent;
  for (int p = 0; p < world; ++p) {
    if (p == rank) continue;
    net::Fd s = connect_abstract(listener_name(comm_id, p), deadline);
    send_handle(s.get(), mine, my_fd, deadline);
    sent.push_back(std::move(s));
  }
  for (int got = 0; got < world - 1; ++got) {
    ReceivedHandle h =
        accept_handle(listener, comm_id, deadline,
                      fmt::format("{} of {} peers sent their workspace handle", got, world - 1));
    const int from = h.header.from_rank;
    if (from < 0 || from >= world || from == rank ||
        out[static_cast<std::size_t>(from)].get() >= 0) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("workspace handle claims to be from rank {} (world {}, twice or "
                              "out of range)",
                              from, world));
    }
    out[static_cast<std::size_t>(from)] = std::move(h.fd);
  }
  return out;
}

}  // namespace tpcomm::transport::cuda
