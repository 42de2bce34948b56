// The TCP store server: one thread, poll(2) over the listening socket and every client, parked
// waits answered when their keys arrive or their deadline passes. A client that breaks the
// protocol is dropped with a logged reason; nobody else notices.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "socket_util.hpp"
#include "store_protocol.hpp"
#include "store_table.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/log.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {

using store_wire::Type;

struct TcpStoreServer::Impl {
  struct Client {
    net::Fd fd;
    std::string peer;
    Bytes in;
    Bytes out;
    bool closing = false;
    std::vector<std::string> ephemeral;  // keys deleted when this client goes
  };
  struct Waiter {
    int fd;
    std::vector<std::string> keys;
    Deadline::Clock::time_point deadline;
  };

  net::Fd listener;
  net::Fd wake;  // eventfd: stop request
  std::uint16_t port = 0;
  std::thread thread;
  std::atomic<bool> stopping{false};

  mutable std::mutex mutex;  // guards data for key_count() from other threads
  control::StoreTable data;
  std::map<int, Client> clients;
  std::list<Waiter> waiters;
  std::atomic<std::size_t> client_total{0};

  void run();
  void accept_clients();
  void read_client(Client& c);
  void handle_frame(Client& c, Type type, const std::uint8_t* payload, std::size_t size);
  // One handler per request type: reads the rest of the request, applies it, queues the reply.
  void handle_set(Client& c, store_wire::Reader& r, bool ephemeral);
  void handle_get(Client& c, store_wire::Reader& r);
  void handle_wait(Client& c, store_wire::Reader& r);
  void handle_add(Client& c, store_wire::Reader& r);
  void handle_compare_set(Client& c, store_wire::Reader& r);
  void handle_delete(Client& c, store_wire::Reader& r);
  void handle_size(Client& c, store_wire::Reader& r);
  void reply(Client& c, const store_wire::Writer& w) {
    Bytes f = w.frame();
    c.out.insert(c.out.end(), f.begin(), f.end());
  }
  void drop(Client& c, const std::string& why) {
    TPCOMM_LOG(kWarn, "store", "client {} dropped: {}; the store keeps serving the others", c.peer,
               why);
    c.closing = true;
    c.out.clear();
  }
  void answer_waiters(bool only_expired);
};

void TcpStoreServer::Impl::accept_clients() {
  while (true) {
    int fd = accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    Client c;
    c.fd = net::Fd(fd);
    c.peer = net::peer_name(fd);
    clients.emplace(fd, std::move(c));
    client_total = clients.size();
  }
}

void TcpStoreServer::Impl::read_client(Client& c) {
  std::uint8_t buf[65536];
  while (true) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.insert(c.in.end(), buf, buf + n);
      continue;
    }
    if (n == 0) {
      if (!c.in.empty()) {
        std::size_t expected = store_wire::kHeaderSize;
        if (c.in.size() >= store_wire::kHeaderSize) {
          expected += store_wire::decode_header(c.in.data()).length;
        }
        drop(c, fmt::format("connection closed in the middle of a frame ({} of {} bytes)",
                            c.in.size(), expected));
      } else {
        c.closing = true;  // a clean goodbye
        c.out.clear();
      }
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) drop(c, "recv(): " + net::errno_text());
    break;
  }
  std::size_t pos = 0;
  while (!c.closing && c.in.size() - pos >= store_wire::kHeaderSize) {
    store_wire::Header h = store_wire::decode_header(c.in.data() + pos);
    if (std::string problem = store_wire::check_header(h); !problem.empty()) {
      drop(c, problem);
      return;
    }
    if (c.in.size() - pos < store_wire::kHeaderSize + h.length) break;
    try {
      handle_frame(c, h.type, c.in.data() + pos + store_wire::kHeaderSize, h.length);
    } catch (const Error& e) {
      drop(c, e.what());
      return;
    }
    pos += store_wire::kHeaderSize + h.length;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<long>(pos));
}

void TcpStoreServer::Impl::handle_frame(Client& c, Type type, const std::uint8_t* payload,
                                        std::size_t size) {
  store_wire::Reader r(payload, size);
  std::lock_guard<std::mutex> lock(mutex);
  switch (type) {
    case Type::kSet:
      return handle_set(c, r, false);
    case Type::kSetEphemeral:
      return handle_set(c, r, true);
    case Type::kGet:
      return handle_get(c, r);
    case Type::kWait:
      return handle_wait(c, r);
    case Type::kAdd:
      return handle_add(c, r);
    case Type::kCompareSet:
      return handle_compare_set(c, r);
    case Type::kDelete:
      return handle_delete(c, r);
    case Type::kSize:
      return handle_size(c, r);
    default:
      throw invalid_input(fmt::format("unknown request type {}", static_cast<int>(type)));
  }
}

void TcpStoreServer::Impl::handle_set(Client& c, store_wire::Reader& r, bool ephemeral) {
  std::string key = r.string();
  Bytes value = r.bytes();
  r.expect_end();
  if (ephemeral) c.ephemeral.push_back(key);
  data.set(key, std::move(value));
  reply(c, store_wire::Writer(Type::kOk));
}

void TcpStoreServer::Impl::handle_get(Client& c, store_wire::Reader& r) {
  std::string key = r.string();
  r.expect_end();
  if (const Bytes* value = data.get(key)) {
    reply(c, store_wire::Writer(Type::kValue).bytes(*value));
  } else {
    reply(c, store_wire::Writer(Type::kNotFound));
  }
}

// Answered now when every key is present, else parked until they are or its deadline passes.
void TcpStoreServer::Impl::handle_wait(Client& c, store_wire::Reader& r) {
  auto timeout_ms = r.i64();
  auto count = r.i64();
  if (count < 0 || count > 1'000'000) throw invalid_input("wait for an absurd number of keys");
  std::vector<std::string> keys;
  for (std::int64_t i = 0; i < count; ++i) keys.push_back(r.string());
  r.expect_end();
  if (data.missing(keys).empty()) {
    reply(c, store_wire::Writer(Type::kOk));
  } else {
    waiters.push_back({c.fd.get(), std::move(keys),
                       Deadline::Clock::now() + std::chrono::milliseconds(timeout_ms)});
  }
}

// A value that is not an integer is the caller's error, answered; the connection stays.
void TcpStoreServer::Impl::handle_add(Client& c, store_wire::Reader& r) {
  std::string key = r.string();
  auto delta = r.i64();
  r.expect_end();
  try {
    reply(c, store_wire::Writer(Type::kInteger).i64(data.add(key, delta)));
  } catch (const Error& e) {
    reply(c, store_wire::Writer(Type::kError).string(e.what()));
  }
}

void TcpStoreServer::Impl::handle_compare_set(Client& c, store_wire::Reader& r) {
  std::string key = r.string();
  bool has_expected = r.u8() != 0;
  Bytes expected = r.bytes();
  Bytes desired = r.bytes();
  r.expect_end();
  Bytes held =
      data.compare_set(key, has_expected ? std::optional<Bytes>(std::move(expected)) : std::nullopt,
                       std::move(desired));
  reply(c, store_wire::Writer(Type::kValue).bytes(held));
}

void TcpStoreServer::Impl::handle_delete(Client& c, store_wire::Reader& r) {
  std::string key = r.string();
  r.expect_end();
  std::erase(c.ephemeral, key);
  reply(c, store_wire::Writer(Type::kBool).u8(data.remove(key) ? 1 : 0));
}

void TcpStoreServer::Impl::handle_size(Client& c, store_wire::Reader& r) {
  r.expect_end();
  reply(c, store_wire::Writer(Type::kInteger).i64(static_cast<std::int64_t>(data.size())));
}

void TcpStoreServer::Impl::answer_waiters(bool only_expired) {
  const auto now = Deadline::Clock::now();
  for (auto it = waiters.begin(); it != waiters.end();) {
    auto client = clients.find(it->fd);
    if (client == clients.end() || client->second.closing) {
      it = waiters.erase(it);
      continue;
    }
    std::vector<std::string> left;
    {
      std::lock_guard<std::mutex> lock(mutex);
      left = data.missing(it->keys);
    }
    if (left.empty() && !only_expired) {
      reply(client->second, store_wire::Writer(Type::kOk));
      it = waiters.erase(it);
    } else if (now >= it->deadline) {
      store_wire::Writer w(Type::kMissing);
      w.i64(static_cast<std::int64_t>(left.size()));
      for (const auto& k : left) w.string(k);
      reply(client->second, left.empty() ? store_wire::Writer(Type::kOk) : w);
      it = waiters.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpStoreServer::Impl::run() {
  while (!stopping) {
    std::vector<pollfd> fds;
    fds.push_back({listener.get(), POLLIN, 0});
    fds.push_back({wake.get(), POLLIN, 0});
    for (auto& [fd, c] : clients) {
      fds.push_back({fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    }
    int timeout = 1000;
    for (const auto& w : waiters) {
      auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(w.deadline - Deadline::Clock::now())
              .count();
      timeout = static_cast<int>(std::max<long>(0, std::min<long>(timeout, ms + 1)));
    }
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      TPCOMM_LOG(kError, "store", "poll(): {}", net::errno_text());
      return;
    }
    if (fds[1].revents & POLLIN) return;
    if (fds[0].revents & POLLIN) accept_clients();
    for (std::size_t i = 2; i < fds.size(); ++i) {
      auto it = clients.find(fds[i].fd);
      if (it == clients.end()) continue;
      Client& c = it->second;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_client(c);
    }
    answer_waiters(false);
    for (auto it = clients.begin(); it != clients.end();) {
      Client& c = it->second;
      while (!c.out.empty()) {
        ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) {
          if (n < 0 && errno != EAGAIN && errno != EINTR) c.closing = true;
          break;
        }
        c.out.erase(c.out.begin(), c.out.begin() + n);
      }
      if (c.closing) {
        std::lock_guard<std::mutex> lock(mutex);
        for (const auto& key : c.ephemeral) data.remove(key);
        it = clients.erase(it);
      } else {
        ++it;
      }
    }
    client_total = clients.size();
  }
}

TcpStoreServer::TcpStoreServer(const std::string& bind_address, std::uint16_t port)
    : impl_(std::make_unique<Impl>()) {
  impl_->listener = net::listen_tcp(bind_address, port);
  net::set_nonblocking(impl_->listener.get());
  impl_->port = net::local_port(impl_->listener.get());
  impl_->wake = net::Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  impl_->thread = std::thread([this] { impl_->run(); });
  TPCOMM_LOG(kInfo, "store", "serving on {}:{}", bind_address, impl_->port);
}

TcpStoreServer::~TcpStoreServer() {
  impl_->stopping = true;
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(impl_->wake.get(), &one, sizeof(one));
  impl_->thread.join();
}

std::uint16_t TcpStoreServer::port() const {
  return impl_->port;
}

std::size_t TcpStoreServer::key_count() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->data.size();
}

std::size_t TcpStoreServer::client_count() const {
  return impl_->client_total;
}

}  // namespace tpcomm
