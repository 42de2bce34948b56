// The ranks meet before a multicast object goes (docs/gpu-graphs.md, "Multimem teardown meets the
// peers"; teardown_barrier.hpp): on real thread bootstraps, nobody passes before the last rank
// arrives; an aborted communicator does not wait; a missing rank ends the wait at the limit,
// without an exception (destructors call it). And the teardown's order: drained, met, released; no
// rank releases while a peer still drains.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
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

TEST(MulticastTeardown, DrainedThenMetThenReleasedWhateverTheMeetingGave) {
  for (bool met : {true, false}) {
    std::vector<std::string> order;
    const bool got = transport::cuda::tear_down_multicast({
        .drain = [&] { order.push_back("drain"); },
        .meet =
            [&] {
              order.push_back("meet");
              return met;
            },
        .release = [&] { order.push_back("release"); },
    });
    EXPECT_EQ(got, met);
    EXPECT_EQ(order, (std::vector<std::string>{"drain", "meet", "release"})) << "met " << met;
  }
}

// A slow rank still draining (its last multimem adds in flight) holds every peer's release.
TEST(MulticastTeardown, NoRankReleasesWhileAPeerStillDrains) {
  constexpr int kW = 3;
  auto group = make_thread_group(kW);
  std::atomic<int> drained{0};
  std::vector<int> drained_at_release(kW, -1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kW; ++r) {
    ranks.emplace_back([&, r] {
      transport::cuda::tear_down_multicast({
          .drain =
              [&] {
                std::this_thread::sleep_for(std::chrono::milliseconds(100 * r));
                ++drained;
              },
          .meet =
              [&] {
                return transport::cuda::meet_before_teardown(
                    *group[r], false, std::chrono::seconds(20), "multimem teardown");
              },
          .release = [&] { drained_at_release[r] = drained.load(); },
      });
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kW; ++r) {
    EXPECT_EQ(drained_at_release[r], kW) << "rank " << r << " released before a peer drained";
  }
}

}  // namespace
}  // namespace tpcomm
