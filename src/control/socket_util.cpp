// POSIX socket helpers with deadlines.
#include "socket_util.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::net {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string errno_text() {
  return std::strerror(errno);
}

std::string peer_name(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "unknown peer";
  char host[NI_MAXHOST] = {};
  char port[NI_MAXSERV] = {};
  getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), port, sizeof(port),
              NI_NUMERICHOST | NI_NUMERICSERV);
  return fmt::format("{}:{}", host, port);
}

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

Fd listen_tcp(const std::string& address, std::uint16_t port) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw Error(ErrorCode::kUnavailable, "socket(): " + errno_text());
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    throw invalid_input(fmt::format("store address \"{}\" is not an IPv4 address", address));
  }
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("cannot bind the store to {}:{}: {}", address, port, errno_text()));
  }
  if (listen(fd.get(), 512) != 0) {
    throw Error(ErrorCode::kUnavailable, "listen(): " + errno_text());
  }
  return fd;
}

std::uint16_t local_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

namespace {

// One non-blocking connect to `ai` that waits for the handshake until the deadline. A signal
// (EINTR, from connect or poll) neither ends nor counts as an attempt: the connection goes on in
// the kernel, and only SO_ERROR says how it ended.
Fd connect_one(const addrinfo* ai, const Deadline& deadline, std::string* why) {
  Fd s(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
  if (s.get() < 0) {
    *why = "socket(): " + errno_text();
    return Fd();
  }
  if (connect(s.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS &&
      errno != EINTR) {
    *why = errno_text();
    return Fd();
  }
  while (true) {
    pollfd p{s.get(), POLLOUT, 0};
    const int rc = poll(&p, 1, deadline.poll_ms());
    if (rc > 0) break;
    if (rc < 0 && errno != EINTR) {
      *why = "poll(): " + errno_text();
      return Fd();
    }
    if (deadline.expired()) {
      *why = fmt::format("no answer to the connection within {} ms", deadline.budget().count());
      return Fd();
    }
  }
  int error = 0;
  socklen_t len = sizeof(error);
  if (getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
  if (error != 0) {
    *why = std::strerror(error);
    return Fd();
  }
  // Blocking again: the callers poll with MSG_DONTWAIT where they must not block.
  fcntl(s.get(), F_SETFL, fcntl(s.get(), F_GETFL, 0) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return s;
}

}  // namespace

Fd connect_tcp(const std::string& host, std::uint16_t port, const Deadline& deadline,
               std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result); rc != 0) {
    *why = fmt::format("cannot resolve {}: {}", host, gai_strerror(rc));
    return Fd();
  }
  Fd fd;
  for (addrinfo* ai = result; ai != nullptr && fd.get() < 0; ai = ai->ai_next) {
    fd = connect_one(ai, deadline, why);
  }
  freeaddrinfo(result);
  return fd;
}

namespace {

bool wait_ready(int fd, short events, const Deadline& deadline, std::string* why) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, deadline.poll_ms());
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) {
      *why = "poll(): " + errno_text();
      return false;
    }
    if (deadline.expired()) {
      *why = fmt::format("no progress within {} ms", deadline.budget().count());
      return false;
    }
  }
}

}  // namespace

bool send_all(int fd, const std::uint8_t* data, std::size_t size, const Deadline& deadline,
              std::string* why) {
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = ::send(fd, data + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_ready(fd, POLLOUT, deadline, why)) return false;
    } else {
      *why = "send(): " + errno_text();
      return false;
    }
  }
  return true;
}

bool recv_all(int fd, std::uint8_t* data, std::size_t size, const Deadline& deadline,
              std::string* why) {
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(fd, data + done, size - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n == 0) {
      *why = "connection closed by the peer";
      return false;
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!wait_ready(fd, POLLIN, deadline, why)) return false;
    } else {
      *why = "recv(): " + errno_text();
      return false;
    }
  }
  return true;
}

std::optional<std::string> address_toward(const std::string& host) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(9);  // any port: connect() on UDP only picks the route
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return std::nullopt;
  Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0 || connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return std::nullopt;
  }
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  char text[INET_ADDRSTRLEN] = {};
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) == nullptr) {
    return std::nullopt;
  }
  return std::string(text);
}

std::optional<std::string> resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || result == nullptr) {
    return std::nullopt;
  }
  char text[INET_ADDRSTRLEN] = {};
  const auto* in = reinterpret_cast<const sockaddr_in*>(result->ai_addr);
  const bool ok = inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr;
  freeaddrinfo(result);
  return ok ? std::optional<std::string>(text) : std::nullopt;
}

bool is_loopback(const std::string& ipv4) {
  return ipv4.rfind("127.", 0) == 0;
}

std::optional<std::string> why_cannot_listen_on(const std::string& address) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) return "not an IPv4 address";
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return "socket(): " + errno_text();
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return "bind(): " + errno_text();
  }
  return std::nullopt;
}

}  // namespace tpcomm::net
