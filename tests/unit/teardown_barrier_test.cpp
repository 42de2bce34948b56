// The ranks meet before a multicast object goes (review N16; teardown_barrier.hpp): on real
// thread bootstraps, nobody passes before the last rank arrives; an aborted communicator does not
// wait; a missing rank ends the wait at the limit, without an exception (destructors call it).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "transport/cuda/teardown_barrier.hpp"

namespace tpcomm {
namespace {

using Clock = std::chrono::steady_clock;

TEST(TeardownBarrier, NoRankPassesBeforeTheLastArrives) {
  constexpr int kW = 3;
  auto group = make_thread_group(kW);
  std::atomic<int> arrived{0};
  std::vector<int> seen(kW, -1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kW; ++r) {
    ranks.emplace_back([&, r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(80 * r));
      ++arrived;
      EXPECT_TRUE(transport::cuda::meet_before_teardown(*group[r], false, std::chrono::seconds(20),
                                                        "teardown"));
      seen[r] = arrived.load();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kW; ++r) EXPECT_EQ(seen[r], kW) << "rank " << r << " passed early";
}

TEST(TeardownBarrier, AnAbortedCommunicatorDoesNotWait) {
  auto group = make_thread_group(2);
  const auto start = Clock::now();
  EXPECT_FALSE(
      transport::cuda::meet_before_teardown(*group[0], true, std::chrono::seconds(20), "teardown"));
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
}

TEST(TeardownBarrier, AMissingRankEndsTheWaitAtTheLimitWithoutThrowing) {
  auto group = make_thread_group(2);
  const auto start = Clock::now();
  bool met = true;
  EXPECT_NO_THROW(met = transport::cuda::meet_before_teardown(
                      *group[0], false, std::chrono::milliseconds(300), "teardown"));
  EXPECT_FALSE(met);
  const auto took = Clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tpcomm
