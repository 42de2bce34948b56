// The bootstrap of a process started by tpcomm run, torchrun or mpirun (DESIGN.md §4).
#include <fmt/format.h>

#include "store_keys.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/log.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

// Keeps the store server that rank 0 hosts alive as long as its bootstrap.
class HostingBootstrap final : public Bootstrap {
 public:
  HostingBootstrap(std::unique_ptr<TcpStoreServer> server, std::shared_ptr<Bootstrap> inner)
      : server_(std::move(server)), inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::shared_ptr<Store> store() const override { return inner_->store(); }
  std::vector<Bytes> all_gather(const Bytes& mine, std::string_view what,
                                const Deadline& deadline) override {
    return inner_->all_gather(mine, what, deadline);
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Bootstrap> inner_;
};

std::optional<std::int64_t> first_of(const char* a, const char* b) {
  if (env_raw(a)) return env_integer(a);
  if (env_raw(b)) return env_integer(b);
  return std::nullopt;
}

}  // namespace

std::shared_ptr<Bootstrap> bootstrap_from_environment(const Deadline& deadline) {
  auto rank = first_of("RANK", "OMPI_COMM_WORLD_RANK");
  auto size = first_of("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
  if (!rank || !size) {
    throw invalid_input(
        "not launched as a group: set RANK and WORLD_SIZE (tpcomm run, torchrun and mpirun do; "
        "for example `tpcomm run -n 2 -- PROGRAM`)");
  }
  auto addr = env_raw("MASTER_ADDR");
  auto port = env_raw("MASTER_PORT");
  if (!addr && !port && env_raw("OMPI_COMM_WORLD_RANK") && !env_raw("RANK")) {
    return make_mpi_bootstrap(deadline);
  }
  if (!addr || !port) {
    throw invalid_input(fmt::format(
        "rank {} of {}: MASTER_ADDR and MASTER_PORT must name the rendezvous store (tpcomm run "
        "sets them; with mpirun export them, e.g. MASTER_ADDR=<host of rank 0> MASTER_PORT=29500)",
        *rank, *size));
  }
  const auto store_port = static_cast<std::uint16_t>(env_integer("MASTER_PORT"));
  std::unique_ptr<TcpStoreServer> server;
  if (*rank == 0) {
    try {
      server = std::make_unique<TcpStoreServer>("0.0.0.0", store_port);
    } catch (const Error& e) {
      // Somebody (tpcomm run, tpcomm store) already serves this port: use theirs.
      TPCOMM_LOG(kDebug, "bootstrap", "not hosting the store: {}", e.what());
    }
  }
  auto store = connect_tcp_store(*addr, store_port, deadline);
  auto inner =
      make_store_bootstrap(std::move(store), static_cast<int>(*rank), static_cast<int>(*size));
  if (!server) return inner;
  inner->store()->set(control::kStoreServedByKey, Bytes{'0'});
  return std::make_shared<HostingBootstrap>(std::move(server), std::move(inner));
}

}  // namespace tpcomm
