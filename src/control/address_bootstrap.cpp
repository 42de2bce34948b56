// StoreHost and bootstrap_from_address: a group that shares the store's address through a channel
// of its own (tpcomm.Communicator.from_torch shares it through torch.distributed's store).
#include <sstream>

#include <fmt/format.h>

#include "common/foreign_error.hpp"
#include "group_scope.hpp"
#include "launched_bootstrap.hpp"
#include "socket_util.hpp"
#include "store_auth.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

constexpr std::string_view kAddressTag = "tpcomm-store";

struct Address {
  std::string host;
  std::uint16_t port = 0;
  std::string group;
  std::string secret;
};

Address parse_address(const std::string& text) {
  std::istringstream in(text);
  std::string tag;
  Address a;
  int port = 0;
  std::string rest;
  if (!(in >> tag >> a.host >> port >> a.group >> a.secret) || tag != kAddressTag || port <= 0 ||
      port > 65535 || (in >> rest)) {
    throw invalid_input(fmt::format(
        "'{}' is not a tpcomm store address (StoreHost::address(): \"{} HOST PORT GROUP SECRET\")",
        text.substr(0, 40), kAddressTag));
  }
  a.port = static_cast<std::uint16_t>(port);
  return a;
}

// `server`: rank 0's StoreHost's, which lives as long as the bootstrap.
std::shared_ptr<Bootstrap> join_by_address(const std::string& address, int rank, int size,
                                           const Deadline& deadline,
                                           std::unique_ptr<TcpStoreServer> server) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw invalid_input(
        fmt::format("bootstrap_from_address: rank {} of {} is not a rank", rank, size));
  }
  const Address a = parse_address(address);
  auto store = connect_tcp_store(a.host, a.port, deadline, a.secret);
  auto group = control::join_group(std::move(store), fmt::format("{}:{}", a.host, a.port), a.group,
                                   rank, deadline);
  return control::launched_bootstrap(std::move(group), rank, size, std::move(server));
}

}  // namespace

struct StoreHost::Impl {
  std::unique_ptr<TcpStoreServer> server;
  std::string address;
};

// Anything but a tpcomm::Error (std::thread's std::system_error, std::bad_alloc) leaves as one.
StoreHost::StoreHost(const std::string& host) {
  common::only_tpcomm_errors("StoreHost", [&] {
    impl_ = std::make_unique<Impl>();
    auto ip = net::resolve_ipv4(host);
    if (!ip) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("StoreHost: {} does not resolve to an IPv4 address", host));
    }
    if (auto why = net::why_cannot_listen_on(*ip)) {
      throw Error(
          ErrorCode::kUnavailable,
          fmt::format("StoreHost: {} ({}) is not an address of this machine: {}", host, *ip, *why));
    }
    TcpStoreOptions options;
    options.secret = control::generate_store_secret();
    impl_->server = std::make_unique<TcpStoreServer>(*ip, 0, options);
    const std::string group = control::generate_store_secret().substr(0, 16);
    impl_->address = fmt::format("{} {} {} {} {}", kAddressTag, *ip, impl_->server->port(), group,
                                 options.secret);
  });
}

StoreHost::~StoreHost() = default;

const std::string& StoreHost::address() const {
  return impl_->address;
}

std::shared_ptr<Bootstrap> bootstrap_from_address(const std::string& address, int rank, int size,
                                                  const Deadline& deadline,
                                                  std::unique_ptr<StoreHost> host) {
  std::unique_ptr<TcpStoreServer> server;
  if (host) server = std::move(host->impl_->server);
  return common::only_tpcomm_errors("joining the group (bootstrap_from_address)", [&] {
    return join_by_address(address, rank, size, deadline, std::move(server));
  });
}

}  // namespace tpcomm
