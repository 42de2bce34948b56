// Bootstrap for threads of one process: a shared table of rounds under one mutex.
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "common/rank_list.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

struct ThreadGroupState {
  explicit ThreadGroupState(int n) : size(n) {}
  const int size;
  std::shared_ptr<Store> store = make_memory_store();
  std::mutex mutex;
  std::condition_variable changed;
  std::map<long, std::vector<std::optional<Bytes>>> rounds;
  std::map<long, int> readers_done;
};

class ThreadBootstrap final : public Bootstrap {
 public:
  ThreadBootstrap(std::shared_ptr<ThreadGroupState> state, int rank)
      : state_(std::move(state)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return state_->size; }
  std::shared_ptr<Store> store() const override { return state_->store; }

  std::vector<Bytes> all_gather(const Bytes& mine, std::string_view what,
                                const Deadline& deadline) override {
    const long round = round_++;
    std::unique_lock<std::mutex> lock(state_->mutex);
    auto& slots = state_->rounds[round];
    slots.resize(static_cast<std::size_t>(state_->size));
    slots[static_cast<std::size_t>(rank_)] = mine;
    state_->changed.notify_all();
    auto missing = [&] {
      std::vector<int> out;
      for (int r = 0; r < state_->size; ++r) {
        if (!state_->rounds[round][static_cast<std::size_t>(r)]) out.push_back(r);
      }
      return out;
    };
    state_->changed.wait_until(lock, deadline.at(), [&] { return missing().empty(); });
    if (auto m = missing(); !m.empty()) {
      throw Error(ErrorCode::kTimeout,
                  fmt::format("{} did not {} within {} ms ({})", common::rank_set_text(m),
                              round == 0 ? "join" : "arrive", deadline.budget().count(), what));
    }
    std::vector<Bytes> out;
    for (auto& s : state_->rounds[round]) out.push_back(*s);
    if (++state_->readers_done[round] == state_->size) {
      state_->rounds.erase(round);
      state_->readers_done.erase(round);
    }
    return out;
  }

 private:
  std::shared_ptr<ThreadGroupState> state_;
  int rank_;
  long round_ = 0;
};

}  // namespace

std::vector<std::shared_ptr<Bootstrap>> make_thread_group(int size) {
  if (size < 1)
    throw invalid_input(fmt::format("a thread group needs at least one rank, not {}", size));
  auto state = std::make_shared<ThreadGroupState>(size);
  std::vector<std::shared_ptr<Bootstrap>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_shared<ThreadBootstrap>(state, r));
  return out;
}

}  // namespace tpcomm
