// Small POSIX socket helpers of the control plane and the transports built on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tpcomm/deadline.hpp"

namespace tpcomm::net {

// Closes the descriptor on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

std::string errno_text();
// "127.0.0.1:5000" of a connected socket's peer.
std::string peer_name(int fd);
void set_nonblocking(int fd);
// Listening TCP socket; throws kUnavailable with the reason.
Fd listen_tcp(const std::string& address, std::uint16_t port);
std::uint16_t local_port(int fd);
// Connected TCP socket, or an invalid Fd with `why` set (one attempt, which waits for the
// handshake at most until the deadline; a signal does not end it).
Fd connect_tcp(const std::string& host, std::uint16_t port, const Deadline& deadline,
               std::string* why);
// Sends or receives all bytes before the deadline; false with `why` on failure.
bool send_all(int fd, const std::uint8_t* data, std::size_t size, const Deadline& deadline,
              std::string* why);
bool recv_all(int fd, std::uint8_t* data, std::size_t size, const Deadline& deadline,
              std::string* why);
// This host's IPv4 address on the route toward `host` (an IPv4 address): the interface its peers
// there can reach. No packet is sent. nullopt when there is no such route.
std::optional<std::string> address_toward(const std::string& host);
// The first IPv4 address of `host` (a name or an address), or nullopt when it does not resolve.
std::optional<std::string> resolve_ipv4(const std::string& host);
bool is_loopback(const std::string& ipv4);
// Why a socket cannot listen on `address` on this host (not an IPv4 address, or not one of this
// host's), or nullopt when it can.
std::optional<std::string> why_cannot_listen_on(const std::string& address);

}  // namespace tpcomm::net
