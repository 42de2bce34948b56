// The barriers around a graph buffer registration (docs/gpu-graphs.md, "Registration against queued
// replays"; registration_fence.hpp), on real thread bootstraps: no rank writes its slots before
// every rank has drained its queued replays, and no rank returns (and so replays) before every rank
// has written its slots. Ranks take rank-dependent times in each phase, so a missing barrier shows
// as an order the test refuses.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/error.hpp"
#include "transport/custom/registration_fence.hpp"

namespace tpcomm {
namespace {

using Clock = std::chrono::steady_clock;
using test::on_ranks;

struct Timeline {
  std::mutex mutex;
  std::vector<Clock::time_point> drained, write_began, written, returned;
  explicit Timeline(int w) : drained(w), write_began(w), written(w), returned(w) {}
  void mark(std::vector<Clock::time_point>& what, int r) {
    std::lock_guard<std::mutex> lock(mutex);
    what[static_cast<std::size_t>(r)] = Clock::now();
  }
};

TEST(RegistrationFence, NoRankWritesBeforeAllDrainedNorReturnsBeforeAllWrote) {
  constexpr int kW = 3;
  Timeline t(kW);
  on_ranks(make_thread_group(kW), [&](int r, std::shared_ptr<Bootstrap> bs) {
    const auto n = transport::cuda::register_between_barriers(
        *bs, Deadline::after(std::chrono::seconds(20)),
        [&] {
          // The last rank's queued replays take longest to finish.
          std::this_thread::sleep_for(std::chrono::milliseconds(60 * r));
          t.mark(t.drained, r);
        },
        [&] {
          t.mark(t.write_began, r);
          std::this_thread::sleep_for(std::chrono::milliseconds(60 * (kW - 1 - r)));
          t.mark(t.written, r);
          return static_cast<std::size_t>(r + 1);
        });
    t.mark(t.returned, r);
    EXPECT_EQ(n, static_cast<std::size_t>(r + 1));
  });
  for (int a = 0; a < kW; ++a) {
    for (int b = 0; b < kW; ++b) {
      EXPECT_LE(t.drained[b], t.write_began[a])
          << "rank " << a << " wrote its slots before rank " << b << " had drained";
      EXPECT_LE(t.written[b], t.returned[a])
          << "rank " << a << " returned before rank " << b << " had written its slots";
    }
  }
}

TEST(RegistrationFence, AMissingRankEndsAtTheDeadline) {
  auto group = make_thread_group(2);
  const auto start = Clock::now();
  bool threw = false;
  try {
    transport::cuda::register_between_barriers(
        *group[0], Deadline::after(std::chrono::milliseconds(500)), [] {},
        [] { return std::size_t{0}; });
  } catch (const Error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("graph buffer registration"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(threw) << "the barrier returned though rank 1 never came";
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tpcomm
