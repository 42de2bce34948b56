// The bootstrap of a group that met on a TCP store (launched_bootstrap.hpp).
#include "launched_bootstrap.hpp"

#include <charconv>
#include <chrono>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/fork_generation.hpp"
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
  LaunchedBootstrap(std::unique_ptr<TcpStoreServer> server, std::shared_ptr<Bootstrap> inner,
                    std::optional<int> served_by)
      : server_(std::move(server)), inner_(std::move(inner)), served_by_(served_by) {}
  // The rank serving the store lingers (bounded) until the other ranks have closed their
  // connections: leaving first would turn their own diagnosis — a dead rank named, a last call
  // finishing — into "the store is unreachable". Not in a fork() child: the connections counted
  // are the parent's (and the server's destructor leaves the parent's store alone).
  ~LaunchedBootstrap() override {
    inner_.reset();
    if (!server_ || common::process_fork_generation() != fork_generation_) return;
    const auto until = std::chrono::steady_clock::now() + kStoreLinger;
    while (server_->client_count() > 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::shared_ptr<Store> store() const override { return inner_->store(); }
  // Every store request of the round, the group's check and the reading of who serves the
  // store included, is inside the try: a store lost at any of them names the rank serving it.
  std::vector<Bytes> all_gather(const Bytes& mine, std::string_view what,
                                const Deadline& deadline) override {
    try {
      std::vector<Bytes> all = inner_->all_gather(mine, what, deadline);
      check_group_intact(*inner_->store());
      if (!served_by_) served_by_ = read_served_by(*inner_->store());
      return all;
    } catch (const Error& e) {
      throw naming_the_store_server(e);
    }
  }

 private:
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
  const std::uint64_t fork_generation_ = common::process_fork_generation();
};

}  // namespace

std::optional<int> read_served_by(Store& group) {
  const auto v = group.get(kStoreServedByKey);
  if (!v || v->empty()) return std::nullopt;
  int rank = -1;
  const char* first = reinterpret_cast<const char*>(v->data());
  const char* last = first + v->size();
  const auto [end, error] = std::from_chars(first, last, rank);
  if (error != std::errc() || end != last || rank < 0) return std::nullopt;
  return rank;
}

// The rank hosting the store writes its number before its first round and knows it at once.
// Another rank reads it now: the host wrote it before its join completed for an anonymous group
// (whose ranks wait for rank 0's claim), and almost always for a named one; where it was not yet
// there, after the first round, which needs the host's part.
std::shared_ptr<Bootstrap> launched_bootstrap(std::shared_ptr<Store> group, int rank, int size,
                                              std::unique_ptr<TcpStoreServer> server) {
  std::optional<int> served_by;
  if (server) {
    const std::string mine = std::to_string(rank);
    group->set(kStoreServedByKey, Bytes(mine.begin(), mine.end()));
    served_by = rank;
  } else {
    try {
      served_by = read_served_by(*group);
    } catch (const Error&) {
      // The store is already gone: the first round reports it.
    }
  }
  auto inner = make_store_bootstrap(std::move(group), rank, size, "tpcomm", kSlotPrefix);
  return std::make_shared<LaunchedBootstrap>(std::move(server), std::move(inner), served_by);
}

}  // namespace tpcomm::control
