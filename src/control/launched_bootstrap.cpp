// The bootstrap of a group that met on a TCP store (launched_bootstrap.hpp).
#include "launched_bootstrap.hpp"

#include <chrono>
#include <thread>

#include "group_scope.hpp"
#include "store_keys.hpp"

namespace tpcomm::control {
namespace {

constexpr std::chrono::seconds kStoreLinger{3};

// Keeps the store server that rank 0 hosts alive as long as its bootstrap, and after every round
// checks that the group was not marked broken (a second process for one of its ranks, another
// group on its store): the other ranks of a broken group fail at the next round, not at a
// deadline, and never form a communicator with a stranger.
class LaunchedBootstrap final : public Bootstrap {
 public:
  LaunchedBootstrap(std::unique_ptr<TcpStoreServer> server, std::shared_ptr<Bootstrap> inner)
      : server_(std::move(server)), inner_(std::move(inner)) {}
  // The rank serving the store lingers (bounded) until the other ranks have closed their
  // connections: leaving first would turn their own diagnosis — a dead rank named, a last call
  // finishing — into "the store is unreachable".
  ~LaunchedBootstrap() override {
    inner_.reset();
    if (!server_) return;
    const auto until = std::chrono::steady_clock::now() + kStoreLinger;
    while (server_->client_count() > 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::shared_ptr<Store> store() const override { return inner_->store(); }
  std::vector<Bytes> all_gather(const Bytes& mine, std::string_view what,
                                const Deadline& deadline) override {
    auto all = inner_->all_gather(mine, what, deadline);
    check_group_intact(*inner_->store());
    return all;
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Bootstrap> inner_;
};

}  // namespace

std::shared_ptr<Bootstrap> launched_bootstrap(std::shared_ptr<Store> group, int rank, int size,
                                              std::unique_ptr<TcpStoreServer> server) {
  if (server) group->set(kStoreServedByKey, Bytes{'0'});
  auto inner = make_store_bootstrap(std::move(group), rank, size, "tpcomm", kSlotPrefix);
  return std::make_shared<LaunchedBootstrap>(std::move(server), std::move(inner));
}

}  // namespace tpcomm::control
