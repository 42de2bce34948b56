// The bootstrap of a group that met on a TCP store (bootstrap_from_environment,
// bootstrap_from_address): the group's scope on the store, and the store server when this rank
// hosts it.
#pragma once

#include <memory>
#include <optional>

#include "tpcomm/bootstrap.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm::control {

// `group`: the group's scoped store (join_group). `server`: the store this rank serves, or null;
// it stays up as long as the bootstrap, and a little longer while peers are still connected.
std::shared_ptr<Bootstrap> launched_bootstrap(std::shared_ptr<Store> group, int rank, int size,
                                              std::unique_ptr<TcpStoreServer> server);

// The rank that serves the group's store (kStoreServedByKey), or nullopt when no rank does
// (a launcher or `tpcomm store` serves it), or it is not known yet, or the value is not a rank.
std::optional<int> read_served_by(Store& group);

}  // namespace tpcomm::control
