// barrier() on a host communicator is one small collective on the plan's route
// (docs/communicator.md, "Calls"): no store request, and the backends tell it apart from a user's
// all-reduce of one int32.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/store.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;
using test::errors_on_ranks;
using test::on_ranks;
using test::ScopedEnv;

// A store that counts the requests it forwards.
class CountingStore : public Store {
 public:
  explicit CountingStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}
  std::uint64_t requests() const { return requests_.load(); }

  void set(const std::string& key, const Bytes& value) override {
    ++requests_;
    inner_->set(key, value);
  }
  std::optional<Bytes> get(const std::string& key) override {
    ++requests_;
    return inner_->get(key);
  }
  std::vector<std::string> wait_for(const std::vector<std::string>& keys,
                                    const Deadline& deadline) override {
    ++requests_;
    return inner_->wait_for(keys, deadline);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    ++requests_;
    return inner_->add(key, delta);
  }
  Bytes compare_set(const std::string& key, const std::optional<Bytes>& expected,
                    const Bytes& desired) override {
    ++requests_;
    return inner_->compare_set(key, expected, desired);
  }
  bool remove(const std::string& key) override {
    ++requests_;
    return inner_->remove(key);
  }
  std::size_t size() override {
    ++requests_;
    return inner_->size();
  }

 private:
  std::shared_ptr<Store> inner_;
  std::atomic<std::uint64_t> requests_{0};
};

std::vector<std::shared_ptr<Bootstrap>> store_group(const std::shared_ptr<Store>& store, int n) {
  std::vector<std::shared_ptr<Bootstrap>> group;
  for (int r = 0; r < n; ++r) group.push_back(make_store_bootstrap(store, r, n));
  return group;
}

// `disable`: TPCOMM_DISABLE for the group ("shm": Gloo carries the calls).
void barriers_make_no_store_request(const char* disable) {
  ScopedEnv env("TPCOMM_DISABLE", disable);
  auto store = std::make_shared<CountingStore>(make_memory_store());
  auto group = store_group(store, 3);
  std::atomic<std::uint64_t> before{0};
  std::atomic<int> last_arrived{0};
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    comm->barrier();  // every rank is past creation (and its store traffic) after this one
    if (r == 0) before = store->requests();
    comm->barrier();
    for (int round = 1; round <= 20; ++round) {
      if (r == 2) {
        std::this_thread::sleep_for(5ms);
        last_arrived = round;
      }
      comm->barrier();
      EXPECT_EQ(last_arrived.load(), round)
          << "rank " << r << " left barrier " << round << " early";
      comm->barrier();  // nobody moves on before every rank has checked
    }
    comm->barrier();
    if (r == 0) {
      EXPECT_EQ(store->requests(), before.load())
          << "42 barriers (" << (disable[0] ? "Gloo" : "shm") << ") made store requests";
    }
    comm->barrier();
  });
}

TEST(CollectiveBarrier, MakesNoStoreRequestOverShm) {
  barriers_make_no_store_request("");
}

TEST(CollectiveBarrier, MakesNoStoreRequestOverGloo) {
  barriers_make_no_store_request("shm");
}

TEST(CollectiveBarrier, MeetingAUsersAllReduceOfOneInt32IsAMismatchNamingTheBarrier) {
  for (const char* disable : {"", "shm"}) {
    ScopedEnv env("TPCOMM_DISABLE", disable);
    CommunicatorOptions options;
    options.timeout = 5000ms;
    auto group = make_thread_group(3);
    std::vector<ErrorCode> codes(3, ErrorCode::kInternal);
    std::vector<double> seconds(3, 0.0);
    const auto errors = errors_on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
      auto comm = Communicator::create(bs, options);
      const auto start = std::chrono::steady_clock::now();
      try {
        if (r == 1) {
          comm->barrier();
        } else {
          const std::int32_t one = 1;
          std::int32_t sum = 0;
          comm->all_reduce(&one, &sum, 1, DataType::kInt32, ReduceOp::kSum);
        }
      } catch (const Error& e) {
        codes[r] = e.code();
        seconds[r] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        throw;
      }
    });
    for (int r = 0; r < 3; ++r) {
      // "rank 1 called barrier #1 (shm one_shot) but rank 0 called all_reduce(int32 x 1, sum) #1
      // (shm one_shot)" (or the other way round), found by this rank's own backend at once,
      // not at the deadline.
      EXPECT_EQ(codes[r], ErrorCode::kMismatch)
          << "TPCOMM_DISABLE=" << disable << ": " << errors[r];
      EXPECT_NE(errors[r].find("called barrier #1"), std::string::npos) << errors[r];
      EXPECT_NE(errors[r].find("called all_reduce(int32 x 1, sum) #1"), std::string::npos)
          << errors[r];
      EXPECT_LT(seconds[r], 2.5) << "rank " << r << ": " << errors[r];
    }
  }
}

}  // namespace
}  // namespace tpcomm
