// The TCP store: a server (in the launcher, in rank 0, or standalone as `tpcomm store`) and a
// client. Protocol: docs/store.md — frames with a magic number, a version and a bounded length.
// A client that speaks anything else is dropped with a logged reason; the others are unaffected.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tpcomm/store.hpp"

namespace tpcomm {

class TcpStoreServer {
 public:
  // Binds and starts serving on a background thread. Port 0 picks a free port. Throws
  // kUnavailable when the address cannot be bound (the message says why).
  TcpStoreServer(const std::string& bind_address, std::uint16_t port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  std::uint16_t port() const;
  std::size_t key_count() const;
  std::size_t client_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Connects, retrying until the deadline (the server may start after the client).
// Throws kTimeout / kUnavailable naming host and port.
std::shared_ptr<Store> connect_tcp_store(const std::string& host, std::uint16_t port,
                                         const Deadline& deadline);

}  // namespace tpcomm
