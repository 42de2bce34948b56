// The TCP store server's state, shared by its event loop (tcp_store_server.cpp) and its request
// handlers (tcp_store_requests.cpp). Only the server thread touches it, except `data` under
// `mutex` for key_count().
#pragma once

#include <atomic>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "socket_util.hpp"
#include "store_protocol.hpp"
#include "store_table.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {

struct TcpStoreServer::Impl {
  using Clock = Deadline::Clock;
  // A connection first says hello, then proves the secret; only then are requests served.
  enum class Stage { kHello, kProof, kReady };

  struct Client {
    net::Fd fd;
    std::string peer;
    Stage stage = Stage::kHello;
    Clock::time_point accepted_at;
    Bytes server_nonce;
    Bytes client_nonce;
    Bytes in;
    Bytes out;
    Clock::time_point out_since;  // when the oldest unsent reply was queued
    bool closing = false;
    std::vector<std::string> ephemeral;  // keys deleted when this client goes
  };
  struct Waiter {
    int fd;
    std::vector<std::string> keys;
    Clock::time_point deadline;
  };

  explicit Impl(TcpStoreOptions o)
      : options(std::move(o)),
        data(options.limits.max_value_bytes, options.limits.max_total_bytes) {}

  TcpStoreOptions options;
  net::Fd listener;
  net::Fd wake;     // eventfd: stop request
  net::Fd reserve;  // kept open so a connection can be refused when descriptors run out
  std::uint16_t port = 0;
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::uint64_t fork_generation = 0;  // the process's when the thread started

  mutable std::mutex mutex;  // guards data for key_count() from other threads
  control::StoreTable data;
  std::map<int, Client> clients;
  std::list<Waiter> waiters;
  std::atomic<std::size_t> client_total{0};

  // tcp_store_server.cpp: the event loop.
  void run();
  void accept_clients();
  void refuse_one_connection();
  void read_client(Client& c);
  void serve_buffered(Client& c);
  void write_client(Client& c);
  void drop_overdue(Clock::time_point now);
  void drop(Client& c, const std::string& why);
  void answer_waiters(bool only_expired);

  // tcp_store_requests.cpp: the handshake and one handler per request type.
  void handle_frame(Client& c, store_wire::Type type, const std::uint8_t* payload,
                    std::size_t size);
  void handle_hello(Client& c, store_wire::Reader& r);
  void handle_proof(Client& c, store_wire::Reader& r);
  void handle_request(Client& c, store_wire::Type type, store_wire::Reader& r);
  void handle_set(Client& c, store_wire::Reader& r, bool ephemeral);
  void handle_claim(Client& c, store_wire::Reader& r);
  void handle_get(Client& c, store_wire::Reader& r);
  void handle_wait(Client& c, store_wire::Reader& r);
  void handle_add(Client& c, store_wire::Reader& r);
  void handle_compare_set(Client& c, store_wire::Reader& r);
  void handle_delete(Client& c, store_wire::Reader& r);
  void handle_size(Client& c, store_wire::Reader& r);
  void reply(Client& c, const store_wire::Writer& w);
  // Answers ERROR(message) and keeps the connection: the request was refused, not malformed.
  void refuse(Client& c, const std::string& message);
  // Applies a request to the table: a refusal by the table (a limit, ADD on a non-integer) is
  // the client's answer, not a reason to drop it.
  template <typename Apply>
  void answer(Client& c, Apply&& apply) {
    try {
      apply();
    } catch (const Error& e) {
      refuse(c, e.what());
    }
  }
  // Answers ERROR(message), then closes once it is sent.
  void refuse_and_close(Client& c, const std::string& message);
};

}  // namespace tpcomm
