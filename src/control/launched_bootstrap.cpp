// The bootstrap of a group that met on a TCP store (launched_bootstrap.hpp).
#include "launched_bootstrap.hpp"

#include <chrono>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "group_scope.hpp"
#include "store_keys.hpp"
#include "store_request_deadline.hpp"
#include "tpcomm/error.hpp"

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
    std::vector<Bytes> all;
    try {
      all = inner_->all_gather(mine, what, deadline);
    } catch (const Error& e) {
      throw naming_the_store_server(e);
    }
    check_group_intact(*inner_->store());
    if (!served_by_) served_by_ = read_served_by();
    return all;
  }

 private:
  // The rank serving the store, once known: it wrote the key before its first round, so it is
  // there after this rank's first round.
  std::optional<int> read_served_by() const {
    auto v = inner_->store()->get(kStoreServedByKey);
    if (!v || v->empty()) return std::nullopt;
    return std::stoi(std::string(v->begin(), v->end()));
  }

  // A round that failed because the store went away names the rank that served it (the
  // communicator's calls do the same once created): "the store is unreachable" alone does not
  // say whom to look at.
  Error naming_the_store_server(const Error& e) const {
    if (!served_by_ || *served_by_ == rank()) return e;
    try {
      const control::ScopedStoreDeadline bound(Deadline::after(std::chrono::milliseconds(1000)));
      inner_->store()->get(kStoreServedByKey);
      return e;  // the store answers: the round failed for another reason
    } catch (const Error& lost) {
      const int r = *served_by_;
      return Error(e.code(),
                   fmt::format("{}; rank {} served the store: {}", e.what(), r,
                               lost.code() == ErrorCode::kTimeout
                                   ? fmt::format("rank {} is cut off from this rank, or stopped", r)
                                   : fmt::format("rank {} is gone, or its store stopped", r)));
    }
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Bootstrap> inner_;
  std::optional<int> served_by_;
};

}  // namespace

std::shared_ptr<Bootstrap> launched_bootstrap(std::shared_ptr<Store> group, int rank, int size,
                                              std::unique_ptr<TcpStoreServer> server) {
  if (server) group->set(kStoreServedByKey, Bytes{'0'});
  auto inner = make_store_bootstrap(std::move(group), rank, size, "tpcomm", kSlotPrefix);
  return std::make_shared<LaunchedBootstrap>(std::move(server), std::move(inner));
}

}  // namespace tpcomm::control
