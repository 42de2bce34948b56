// The TCP store server's event loop: one thread, poll(2) over the listening socket and every
// client, parked waits answered when their keys arrive or their deadline passes. A client is read
// only while it has no unsent reply, so one that never reads holds at most one reply and is
// dropped after limits.unread_reply_timeout; connections that never finish the handshake are
// dropped after limits.handshake_timeout, the oldest first when too many are pending, and running
// out of descriptors refuses one connection instead of spinning (docs/store.md, "Limits").
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "common/foreign_error.hpp"
#include "common/fork_generation.hpp"
#include "common/log_format.hpp"
#include "tcp_store_server_impl.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {

using store_wire::Type;
using Impl = TcpStoreServer::Impl;

void Impl::drop(Client& c, const std::string& why) {
  TPCOMM_LOG(kWarn, "store", "client {} dropped: {}; the store keeps serving the others", c.peer,
             why);
  c.closing = true;
  c.out.clear();
  // Read what the client already sent (a bounded amount), so that closing sends it an orderly
  // end of stream rather than a reset.
  std::uint8_t sink[4096];
  for (int i = 0; i < 16 && ::recv(c.fd.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
  }
}

// The descriptor table is full: free the reserve, take the connection and close it at once, so
// the listener does not stay readable (a busy loop) while the group's ranks are refused.
void Impl::refuse_one_connection() {
  reserve.reset();
  int fd = accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    TPCOMM_LOG(kWarn, "store", "out of file descriptors: refused the connection of {}",
               net::peer_name(fd));
    ::close(fd);
  }
  reserve = net::Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

void Impl::accept_clients() {
  while (true) {
    int fd = accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) refuse_one_connection();
      return;
    }
    Client c;
    c.fd = net::Fd(fd);
    c.peer = net::peer_name(fd);
    c.accepted_at = Clock::now();
    clients.emplace(fd, std::move(c));
    // Too many connections still in their handshake: the oldest goes, so idle strangers cannot
    // crowd out the group's ranks.
    std::vector<Client*> pending;
    for (auto& [cfd, client] : clients) {
      if (client.stage != Stage::kReady && !client.closing) pending.push_back(&client);
    }
    if (pending.size() > options.limits.max_handshaking) {
      Client* oldest = *std::min_element(pending.begin(), pending.end(), [](auto* a, auto* b) {
        return a->accepted_at < b->accepted_at;
      });
      drop(*oldest, fmt::format("more than {} connections are in their handshake; the oldest goes",
                                options.limits.max_handshaking));
    }
  }
}

// Reads what the client sent, at most one frame ahead of what has been served.
void Impl::read_client(Client& c) {
  std::uint8_t buf[65536];
  while (true) {
    std::size_t want = store_wire::kHeaderSize;
    if (c.in.size() >= store_wire::kHeaderSize) {
      want += store_wire::decode_header(c.in.data()).length;
    }
    if (c.in.size() >= want) break;
    ssize_t n = ::recv(c.fd.get(), buf, std::min(sizeof(buf), want - c.in.size()), 0);
    if (n > 0) {
      c.in.insert(c.in.end(), buf, buf + n);
      if (c.in.size() == store_wire::kHeaderSize) {
        store_wire::Header h = store_wire::decode_header(c.in.data());
        if (std::string problem = store_wire::check_header(h); !problem.empty()) {
          return drop(c, problem);
        }
        // Before the handshake only tiny frames: a stranger cannot make the store buffer much.
        if (c.stage != Stage::kReady && h.length > 1024) {
          return drop(c, fmt::format("a frame of {} bytes before the handshake", h.length));
        }
      }
      continue;
    }
    if (n == 0) {
      if (!c.in.empty()) {
        return drop(c, fmt::format("connection closed in the middle of a frame ({} of {} bytes)",
                                   c.in.size(), want));
      }
      c.closing = true;  // a clean goodbye
      c.out.clear();
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) drop(c, "recv(): " + net::errno_text());
    return;
  }
}

// Serves the buffered frame when it is complete and nothing is waiting to be sent.
void Impl::serve_buffered(Client& c) {
  if (c.closing || !c.out.empty() || c.in.size() < store_wire::kHeaderSize) return;
  store_wire::Header h = store_wire::decode_header(c.in.data());
  if (c.in.size() < store_wire::kHeaderSize + h.length) return;
  try {
    handle_frame(c, h.type, c.in.data() + store_wire::kHeaderSize, h.length);
  } catch (const Error& e) {
    return drop(c, e.what());
  }
  c.in.clear();
}

void Impl::write_client(Client& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        c.closing = true;
        c.out.clear();
      }
      return;
    }
    c.out.erase(c.out.begin(), c.out.begin() + n);
    c.out_since = Clock::now();
  }
}

void Impl::drop_overdue(Clock::time_point now) {
  for (auto& [fd, c] : clients) {
    if (c.closing) {
      // A refusal the client does not read is not worth keeping the connection for.
      if (!c.out.empty() && now - c.out_since > options.limits.handshake_timeout) c.out.clear();
      continue;
    }
    if (c.stage != Stage::kReady && now - c.accepted_at > options.limits.handshake_timeout) {
      drop(c, fmt::format("no handshake within {} ms", options.limits.handshake_timeout.count()));
    } else if (!c.out.empty() && now - c.out_since > options.limits.unread_reply_timeout) {
      drop(c, fmt::format("it left {} bytes of replies unread for {} ms", c.out.size(),
                          options.limits.unread_reply_timeout.count()));
    }
  }
}

void Impl::answer_waiters(bool only_expired) {
  const auto now = Clock::now();
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

void Impl::run() {
  while (!stopping) {
    std::vector<pollfd> fds;
    fds.push_back({listener.get(), POLLIN, 0});
    fds.push_back({wake.get(), POLLIN, 0});
    for (auto& [fd, c] : clients) {
      fds.push_back({fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
    }
    int timeout = 1000;
    for (const auto& w : waiters) {
      auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(w.deadline - Clock::now()).count();
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
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_client(it->second);
    }
    answer_waiters(false);
    const auto now = Clock::now();
    drop_overdue(now);
    for (auto it = clients.begin(); it != clients.end();) {
      Client& c = it->second;
      serve_buffered(c);
      write_client(c);
      serve_buffered(c);  // the next request, when the reply went out at once
      write_client(c);
      if (c.closing && c.out.empty()) {
        std::lock_guard<std::mutex> lock(mutex);
        for (const auto& key : c.ephemeral) data.remove(key);
        it = clients.erase(it);
      } else {
        ++it;
      }
    }
    client_total = clients.size();
    // Keys the requests just served set: their waiters' answers go out at the next poll, not
    // when a waiter's deadline wakes it.
    answer_waiters(false);
  }
}

// Anything but a tpcomm::Error (std::thread's std::system_error, std::bad_alloc) leaves as one.
TcpStoreServer::TcpStoreServer(const std::string& bind_address, std::uint16_t port,
                               TcpStoreOptions options) {
  common::only_tpcomm_errors("serving the store", [&] {
    impl_ = std::make_unique<Impl>(std::move(options));
    impl_->listener = net::listen_tcp(bind_address, port);
    net::set_nonblocking(impl_->listener.get());
    impl_->port = net::local_port(impl_->listener.get());
    impl_->wake = net::Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (impl_->wake.get() < 0) {
      throw Error(ErrorCode::kUnavailable, "serving the store: eventfd(): " + net::errno_text());
    }
    impl_->reserve = net::Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    impl_->fork_generation = common::process_fork_generation();
    impl_->thread = std::thread([this] { impl_->run(); });
  });
  TPCOMM_LOG(kInfo, "store", "serving on {}:{}{}", bind_address, impl_->port,
             impl_->options.secret.empty() ? " without a secret" : "");
}

// In a fork() child the loop's thread and the stop eventfd are the parent's: writing the eventfd
// would stop the parent's store, and the thread does not exist here to be joined. The child's
// copy is left as it is (the communicator's state in a child is, too).
TcpStoreServer::~TcpStoreServer() {
  if (common::process_fork_generation() != impl_->fork_generation) {
    static_cast<void>(impl_.release());
    return;
  }
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
