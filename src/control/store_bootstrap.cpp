// Bootstrap over a store: round n of an all-gather writes <prefix>/<n>/<rank>, waits for every
// rank's key, reads them, and counts itself in <prefix>/<n>/read; the last reader deletes the
// round.
#include <unordered_set>

#include <fmt/format.h>

#include "common/rank_list.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

class StoreBootstrap final : public Bootstrap {
 public:
  StoreBootstrap(std::shared_ptr<Store> store, int rank, int size, std::string prefix,
                 std::string presence_prefix)
      : store_(std::move(store)),
        rank_(rank),
        size_(size),
        prefix_(std::move(prefix)),
        presence_prefix_(std::move(presence_prefix)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::shared_ptr<Store> store() const override { return store_; }

  std::vector<Bytes> all_gather(const Bytes& mine, std::string_view what,
                                const Deadline& deadline) override {
    const long round = round_++;
    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) keys.push_back(key(round, r));
    store_->set(keys[static_cast<std::size_t>(rank_)], mine);
    auto missing = wait_watching_presence(keys, round, what, deadline);
    if (!missing.empty()) {
      // A set, not a search per rank: a group of 100000 that times out says so at once.
      const std::unordered_set<std::string> absent(missing.begin(), missing.end());
      std::vector<int> ranks;
      for (int r = 0; r < size_; ++r) {
        if (absent.contains(keys[static_cast<std::size_t>(r)])) ranks.push_back(r);
      }
      throw Error(ErrorCode::kTimeout,
                  fmt::format("{} did not {} within {} ms ({})", common::rank_set_text(ranks),
                              round == 0 ? "join" : "arrive", deadline.budget().count(), what));
    }
    std::vector<Bytes> out;
    for (const auto& k : keys) {
      auto v = store_->get(k);
      if (!v) throw Error(ErrorCode::kInternal, "store key vanished during " + std::string(what));
      out.push_back(std::move(*v));
    }
    // The last rank to have read a round deletes it: no round outlives its readers, the last one
    // included (a group of short-lived sub-bootstraps, as hier makes, leaves nothing behind).
    const std::string readers = fmt::format("{}/{}/read", prefix_, round);
    if (store_->add(readers, 1) == size_) {
      for (const auto& k : keys) store_->remove(k);
      store_->remove(readers);
    }
    return out;
  }

 private:
  std::string key(long round, int rank) const {
    return fmt::format("{}/{}/{}", prefix_, round, rank);
  }

  // Waits in slices; between them, a rank still missing after the first round whose presence key
  // has gone is dead (its store connection closed): an error now, not at the deadline.
  std::vector<std::string> wait_watching_presence(const std::vector<std::string>& keys, long round,
                                                  std::string_view what, const Deadline& deadline) {
    if (presence_prefix_.empty() || round == 0) return store_->wait_for(keys, deadline);
    constexpr auto kSlice = std::chrono::milliseconds(250);
    constexpr std::size_t kChecked = 64;  // presence checks per slice, at most
    while (true) {
      auto missing = store_->wait_briefly(keys, kSlice, deadline);
      if (missing.empty() || deadline.expired()) return missing;
      for (std::size_t i = 0; i < missing.size() && i < kChecked; ++i) {
        const int r = std::stoi(missing[i].substr(missing[i].rfind('/') + 1));
        if (!store_->get(presence_prefix_ + std::to_string(r))) {
          throw Error(ErrorCode::kUnavailable,
                      fmt::format("rank {} died during {} (the process ended: its store "
                                  "connection closed)",
                                  r, what));
        }
      }
    }
  }

  std::shared_ptr<Store> store_;
  int rank_;
  int size_;
  std::string prefix_;
  std::string presence_prefix_;
  long round_ = 0;
};

}  // namespace

Bytes Bootstrap::broadcast(const Bytes& data, int root, std::string_view what,
                           const Deadline& deadline) {
  auto all = all_gather(rank() == root ? data : Bytes{}, what, deadline);
  return all[static_cast<std::size_t>(root)];
}

void Bootstrap::barrier(std::string_view what, const Deadline& deadline) {
  all_gather(Bytes{}, what, deadline);
}

std::shared_ptr<Bootstrap> make_store_bootstrap(std::shared_ptr<Store> store, int rank, int size,
                                                std::string prefix, std::string presence_prefix) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw invalid_input(
        fmt::format("rank {} of a group of {}: expected 0 <= rank < size", rank, size));
  }
  return std::make_shared<StoreBootstrap>(std::move(store), rank, size, std::move(prefix),
                                          std::move(presence_prefix));
}

}  // namespace tpcomm
