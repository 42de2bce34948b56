// The group of one launch (group_launch.hpp).
#include "group_launch.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cstring>

#include <fmt/format.h>

#include "control/store_auth.hpp"
#include "sim_nodes/node_links.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::cli {
namespace {

// A TCP port on `address` that nothing listens on now: the kernel's pick for a bind to port 0,
// released at once for the rank that will listen on it (torchrun --standalone picks its port the
// same way; another program could take it in between, which then fails that rank's bind).
std::uint16_t unused_port(const std::string& address) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw Error(ErrorCode::kUnavailable, "tpcomm run: socket(): " + std::string(strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = strerror(errno);
    close(fd);
    throw Error(ErrorCode::kUnavailable,
                fmt::format("tpcomm run: no free port on {} for torch's store: {}", address, why));
  }
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

// The group's store, its secret and its name are new for every launch: a process that is not one
// of our ranks can neither join the group nor read what the ranks exchange.
// With the node network the store listens on node 0's address, inside node 0's namespace, where
// every node reaches it over its link (as MASTER_ADDR names rank 0's host on a real cluster).
// MASTER_PORT is not the store's: a program that calls torch.distributed.init_process_group()
// has its rank 0 listen on MASTER_PORT, so the ranks find tpcomm's store at TPCOMM_STORE_PORT and
// torch gets a port of its own (docs/store.md, "tpcomm run and torch.distributed").
std::unique_ptr<TcpStoreServer> serve_new_group(GroupLaunch& group, const SimulatedNodes* nodes) {
  group.group_id = "run-" + control::generate_store_secret().substr(0, 16);
  group.secret = control::generate_store_secret();
  TcpStoreOptions options;
  options.secret = group.secret;
  std::unique_ptr<TcpStoreServer> store;
  if (nodes && nodes->network()) {
    group.master_addr = netlinks::node_address(0);
    nodes->network()->in_node(0, [&] {
      store = std::make_unique<TcpStoreServer>(group.master_addr, 0, options);
      group.torch_port = unused_port(group.master_addr);
    });
  } else {
    store = std::make_unique<TcpStoreServer>("127.0.0.1", 0, options);
    group.torch_port = unused_port("127.0.0.1");
  }
  group.port = store->port();
  return store;
}

}  // namespace tpcomm::cli
