// The TCP store: a server (in the launcher, in rank 0, or standalone as `tpcomm store`) and a
// client. Protocol: docs/store.md — frames with a magic number, a version and a bounded length,
// and a handshake in which both ends prove the group's secret. A client that speaks anything
// else, or cannot prove the secret, gets one error and a closed connection; the others are
// unaffected.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "tpcomm/store.hpp"

namespace tpcomm {

// What one store accepts, so that no client can exhaust it (docs/store.md, "Limits").
struct TcpStoreLimits {
  std::size_t max_value_bytes = std::size_t{16} << 20;   // one value
  std::size_t max_total_bytes = std::size_t{512} << 20;  // keys and values held
  // Connections still in their handshake; beyond this the oldest is dropped.
  std::size_t max_handshaking = 128;
  // A connection that has not proved the secret by then is dropped.
  std::chrono::milliseconds handshake_timeout{10'000};
  // A client that leaves a reply unread this long is dropped.
  std::chrono::milliseconds unread_reply_timeout{30'000};
};

struct TcpStoreOptions {
  // The group's shared secret; empty: clients need none (docs/store.md, "Threat model").
  std::string secret;
  TcpStoreLimits limits;
};

class TcpStoreServer {
 public:
  // Binds and starts serving on a background thread. Port 0 picks a free port. Throws
  // kUnavailable when the address cannot be bound (the message says why).
  TcpStoreServer(const std::string& bind_address, std::uint16_t port, TcpStoreOptions options = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  std::uint16_t port() const;
  std::size_t key_count() const;
  std::size_t client_count() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Connects and proves `secret` (empty: none), retrying the connection until the deadline (the
// server may start after the client). Throws kTimeout / kUnavailable naming host and port, and
// kInvalidInput when the store and this client disagree on the secret.
std::shared_ptr<Store> connect_tcp_store(const std::string& host, std::uint16_t port,
                                         const Deadline& deadline, const std::string& secret = {});

}  // namespace tpcomm
