// TPCOMM_SHM_STAGE_TIMES: shm clocks the parts of its protocol steps for stage_times(). A rank
// that comes 300 ms late shows on its peer as wait, not as fill or consume; the parts add up to
// no more than the calls took; without the variable shm reports nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

std::chrono::nanoseconds part(const std::vector<StageTime>& parts, const std::string& name) {
  for (const auto& p : parts) {
    if (p.name == name) return p.total;
  }
  ADD_FAILURE() << "no stage named " << name;
  return {};
}

TEST(ShmStageTimes, ALateRankIsItsPeersWaitAndThePartsFitInTheCalls) {
  const test::ScopedEnv on("TPCOMM_SHM_STAGE_TIMES", "1");
  std::vector<std::vector<StageTime>> spent(2);
  std::vector<std::chrono::nanoseconds> took(2);
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    std::vector<float> data(16384, 1.0f);  // 64 KiB: one step
    comm->barrier();
    const auto start = std::chrono::steady_clock::now();
    if (r == 1) std::this_thread::sleep_for(300ms);
    for (int i = 0; i < 50; ++i) {
      comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kMax);
    }
    took[static_cast<std::size_t>(r)] = std::chrono::steady_clock::now() - start;
    spent[static_cast<std::size_t>(r)] = comm->stage_times();
  });
  for (int r = 0; r < 2; ++r) {
    const auto& mine = spent[static_cast<std::size_t>(r)];
    ASSERT_EQ(mine.size(), 3u) << "rank " << r;
    const auto fill = part(mine, "shm fill (copy in)");
    const auto wait = part(mine, "shm wait (flags, headers)");
    const auto consume = part(mine, "shm consume (reduce, copy out)");
    EXPECT_GT(fill.count(), 0) << "rank " << r;
    EXPECT_GT(consume.count(), 0) << "rank " << r;
    EXPECT_LE(fill + wait + consume, took[static_cast<std::size_t>(r)] + 300ms) << "rank " << r;
    // Rank 0 waited for rank 1's first call; rank 1 never waited long.
    if (r == 0) {
      EXPECT_GE(wait, 250ms);
    } else {
      EXPECT_LT(wait, 250ms);
    }
  }
}

TEST(ShmStageTimes, OffByDefault) {
  test::on_ranks(make_thread_group(2), [&](int, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    std::vector<float> data(1024, 1.0f);
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_TRUE(comm->stage_times().empty());
  });
}

}  // namespace
}  // namespace tpcomm
