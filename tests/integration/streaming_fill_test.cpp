// Which shm all-reduces fill their lanes with streaming stores (TPCOMM_SHM_STREAMING_FILL): by
// default none at W = 2, whose slots take turns so that a fill finds its lines in its own cache,
// and those of 16 MiB or more beyond two ranks; a value set in the environment holds at any W.
// Read off the debug line a communicator logs when it first fills this way; every element of the
// sums is checked as well.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/log.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

// Counts "fills its lane with streaming stores" lines while alive.
class StreamingLines {
 public:
  StreamingLines() {
    set_log_level(LogLevel::kDebug);
    set_log_sink([this](LogLevel, std::string_view subsystem, std::string_view message) {
      if (subsystem == "shm" && message.find("streaming stores") != std::string_view::npos) ++count;
    });
  }
  ~StreamingLines() {
    set_log_sink(nullptr);
    set_log_level(LogLevel::kWarn);
  }
  std::atomic<int> count{0};
};

// How many ranks of `world` logged a streaming fill for one all-reduce of `count` floats.
int streaming_ranks(int world, std::size_t count) {
  const StreamingLines lines;
  test::on_ranks(make_thread_group(world), [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 60s;
    auto comm = Communicator::create(bs, o);
    ASSERT_EQ(comm->route(Op::kAllReduce, count * 4, DataType::kFloat32, Mode::kEager).backend,
              Backend::kShm);
    std::vector<float> data(count);
    for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<float>((r + 1) * (i % 97));
    comm->all_reduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum);
    const float ranks_sum = static_cast<float>(world * (world + 1) / 2);
    int wrong = 0;
    for (std::size_t i = 0; i < count; ++i)
      wrong += data[i] != ranks_sum * static_cast<float>(i % 97);
    EXPECT_EQ(wrong, 0) << "rank " << r << " of " << world;
  });
  return lines.count.load();
}

constexpr std::size_t k16MiBOfFloats = std::size_t{4} << 20;

TEST(StreamingFill, TwoRanksNeverStreamByDefault) {
  EXPECT_EQ(streaming_ranks(2, k16MiBOfFloats), 0);
}

TEST(StreamingFill, ThreeRanksStreamFrom16MiBByDefault) {
  EXPECT_EQ(streaming_ranks(3, k16MiBOfFloats), 3);
  EXPECT_EQ(streaming_ranks(3, k16MiBOfFloats / 2), 0);
}

TEST(StreamingFill, AThresholdFromTheEnvironmentHoldsForTwoRanks) {
  const test::ScopedEnv env("TPCOMM_SHM_STREAMING_FILL", "65536");
  EXPECT_EQ(streaming_ranks(2, 16384), 2);
  EXPECT_EQ(streaming_ranks(2, 16383), 0);
}

}  // namespace
}  // namespace tpcomm
