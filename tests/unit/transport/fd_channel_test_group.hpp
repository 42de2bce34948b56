// A node's ranks as threads of one test on the real fd channel (fd_channel.hpp): every rank's
// listener, and the record the ranks agreed through a thread bootstrap (fd_channel_auth.hpp).
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tpcomm/bootstrap.hpp"
#include "transport/cuda/fd_channel.hpp"

namespace tpcomm::transport::cuda::test {

struct FdTestGroup {
  std::uint64_t comm = 0;
  std::vector<FdListener> listeners;  // a foreign rank's has no socket here
  std::vector<FdChannelAuth> auth;    // by rank

  int listener(int rank) const { return listeners[static_cast<std::size_t>(rank)].socket.get(); }
  const std::string& listener_name(int rank) const {
    return listeners[static_cast<std::size_t>(rank)].name;
  }
  void close_listeners() {
    for (FdListener& l : listeners) l.socket.reset();
  }
};

// `world` ranks of channel `comm`; rank `foreign` (if any) announces the abstract name
// `foreign_name` as its listener, which somebody else holds (or nobody).
inline FdTestGroup make_fd_test_group(int world, std::uint64_t comm, int foreign = -1,
                                      const std::string& foreign_name = "") {
  FdTestGroup g;
  g.comm = comm;
  for (int r = 0; r < world; ++r) {
    g.listeners.push_back(r == foreign ? FdListener{net::Fd(), foreign_name}
                                       : listen_fd_channel(comm, r));
  }
  g.auth.resize(static_cast<std::size_t>(world));
  auto boots = make_thread_group(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      g.auth[i] = agree_fd_channel(*boots[i], comm, g.listeners[i].name,
                                   Deadline::after(std::chrono::seconds(10)));
    });
  }
  for (auto& t : ranks) t.join();
  return g;
}

inline std::vector<net::Fd> exchange_in(FdTestGroup& g, int rank, int fd, std::uint64_t bytes,
                                        const Deadline& deadline) {
  return exchange_handles(g.auth[static_cast<std::size_t>(rank)], g.listener(rank), fd, bytes,
                          deadline);
}

inline net::Fd broadcast_in(FdTestGroup& g, int rank, int root, int fd, std::uint64_t bytes,
                            const Deadline& deadline) {
  return broadcast_handle(g.auth[static_cast<std::size_t>(rank)], root, g.listener(rank), fd, bytes,
                          deadline);
}

}  // namespace tpcomm::transport::cuda::test
