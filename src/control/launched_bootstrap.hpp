// The bootstrap of a group that met on a TCP store (bootstrap_from_environment,
// bootstrap_from_address): the group's scope on the store, and the store server when this rank
// hosts it.
#pragma once

#include <memory>

#include "tpcomm/bootstrap.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm::control {

// `group`: the group's scoped store (join_group). `server`: the store this rank serves, or null;
// it stays up as long as the bootstrap, and a little longer while peers are still connected.
std::shared_ptr<Bootstrap> launched_bootstrap(std::shared_ptr<Store> group, int rank, int size,
                                              std::unique_ptr<TcpStoreServer> server);

}  // namespace tpcomm::control
