// broadcast, barrier, split and the log sink, one thread per rank. Data differ by rank and by
// element, and every element is checked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/log.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;
using test::errors_on_ranks;
using test::on_ranks;

std::uint32_t pattern(int rank, std::size_t i) {
  return static_cast<std::uint32_t>(rank + 1) * 0x01000193u ^
         static_cast<std::uint32_t>(i * 2654435761u);
}

TEST(Broadcast, EveryRootsBitsReachEveryRankAcrossSeveralChunks) {
  // 300 000 float32 elements: more than one 1 MiB chunk. The bit patterns include NaNs, -0 and
  // denormals: broadcast moves bits, an arithmetic stand-in would change them.
  constexpr std::size_t kCount = 300'000;
  auto group = make_thread_group(3);
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    for (int root = 0; root < 3; ++root) {
      std::vector<std::uint32_t> data(kCount);
      for (std::size_t i = 0; i < kCount; ++i) data[i] = pattern(r, i);
      data[0] = 0x80000000u;  // -0.0f
      data[1] = 0x7fc00001u;  // a NaN with a payload
      comm->broadcast(data.data(), kCount, DataType::kFloat32, root);
      int wrong = 0;
      for (std::size_t i = 2; i < kCount; ++i) {
        if (data[i] != pattern(root, i) && wrong++ < 3)
          ADD_FAILURE() << "rank " << r << " root " << root << " element " << i;
      }
      EXPECT_EQ(data[0], 0x80000000u);
      EXPECT_EQ(data[1], 0x7fc00001u);
    }
    // bf16: 2-byte elements, an odd count.
    std::vector<std::uint16_t> half(1001);
    for (std::size_t i = 0; i < half.size(); ++i)
      half[i] = static_cast<std::uint16_t>(pattern(r, i));
    comm->broadcast(half.data(), half.size(), DataType::kBFloat16, 2);
    for (std::size_t i = 0; i < half.size(); ++i)
      ASSERT_EQ(half[i], static_cast<std::uint16_t>(pattern(2, i)))
          << "rank " << r << " bf16 " << i;
  });
}

TEST(Broadcast, ARootOutsideTheGroupIsRefusedOnEveryRankBeforeAnyWait) {
  auto group = make_thread_group(2);
  const auto errors = errors_on_ranks(group, [&](int, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    float x = 1;
    try {
      comm->broadcast(&x, 1, DataType::kFloat32, 2);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
      EXPECT_FALSE(comm->aborted()) << "a refused argument does not break the communicator";
      throw;
    }
  });
  for (const auto& e : errors)
    EXPECT_NE(e.find("root 2 is not a rank of this group of 2"), std::string::npos) << e;
}

TEST(Broadcast, RanksThatDisagreeOnTheRootAreAMismatchWithTheCheck) {
  test::ScopedEnv check("TPCOMM_CHECK", "1");
  auto group = make_thread_group(2);
  const auto errors = errors_on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    float x = static_cast<float>(r);
    comm->broadcast(&x, 1, DataType::kFloat32, r);
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("rank 0 called broadcast(1 x float32, root 0); rank 1 called broadcast(1 x "
                     "float32, root 1)"),
              std::string::npos)
        << e;
  }
}

TEST(Barrier, ReturnsOnlyAfterTheLastRankArrives) {
  auto group = make_thread_group(3);
  std::atomic<bool> last_arrived{false};
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    for (int round = 0; round < 3; ++round) {
      if (r == 2) {
        std::this_thread::sleep_for(100ms);
        last_arrived = true;
      }
      comm->barrier();
      EXPECT_TRUE(last_arrived.load()) << "rank " << r << " left barrier " << round << " early";
      comm->barrier();  // nobody resets the flag before everyone has checked it
      if (r == 2) last_arrived = false;
      comm->barrier();
    }
  });
}

TEST(Barrier, ARankThatNeverComesIsNamedOnTheOthersAtTheDeadline) {
  auto group = make_thread_group(3);
  CommunicatorOptions options;
  options.timeout = 1500ms;
  const auto errors = errors_on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs, options);
    if (r == 1) {
      std::this_thread::sleep_for(2500ms);  // past the others' deadline, then leaves
      return;
    }
    comm->barrier();
  });
  EXPECT_EQ(errors[1], "");
  for (int r : {0, 2}) {
    EXPECT_NE(errors[r].find("barrier #1 via"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("rank 1"), std::string::npos) << errors[r];
  }
}

TEST(Split, ColorsFormGroupsRankedByKeyAndEachReducesOnItsOwn) {
  // 4 ranks: colors 0 (ranks 0, 2) and 1 (ranks 1, 3); key -rank reverses the order in each.
  auto group = make_thread_group(4);
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    auto sub = comm->split(r % 2, -r);
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), 2);
    EXPECT_EQ(sub->rank(), r < 2 ? 1 : 0) << "rank " << r;
    std::vector<float> v(5000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * 100 + i % 13);
    sub->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    const int a = r % 2;
    const int b = a + 2;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float expect = static_cast<float>((a + 1) * 100 + i % 13 + (b + 1) * 100 + i % 13);
      ASSERT_EQ(v[i], expect) << "rank " << r << " element " << i;
    }
    // The parent keeps working beside its sub-communicator, and the sub-communicator without
    // the parent.
    float one = 1;
    comm->all_reduce(&one, &one, 1, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(one, 4.0f);
    comm.reset();
    sub->barrier();
  });
}

TEST(Split, ANegativeColorTakesPartAndGetsNone) {
  auto group = make_thread_group(3);
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    auto sub = comm->split(r == 1 ? -1 : 7, 0);
    if (r == 1) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), 2);
    EXPECT_EQ(sub->rank(), r == 0 ? 0 : 1);
    float x = static_cast<float>(r + 1);
    sub->broadcast(&x, 1, DataType::kFloat32, 1);
    EXPECT_EQ(x, 3.0f);
  });
}

TEST(LogSink, AProgramsSinkAndLogFileReceiveTheLinesInsteadOfStderr) {
  std::mutex mutex;
  std::vector<std::string> lines;
  set_log_level(LogLevel::kInfo);
  set_log_sink([&](LogLevel level, std::string_view subsystem, std::string_view message) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(std::string(log_level_name(level)) + " " + std::string(subsystem) + " " +
                    std::string(message));
  });
  auto group = make_thread_group(2);
  on_ranks(group, [&](int, std::shared_ptr<Bootstrap> bs) { Communicator::create(bs); });
  set_log_sink(nullptr);
  int ready = 0;
  for (const auto& l : lines)
    ready += l.rfind("info comm rank ", 0) == 0 && l.find(": ready, plan ") != std::string::npos;
  EXPECT_EQ(ready, 2) << "each rank's 'ready' line reaches the sink";

  const std::string path = "/tmp/tpcomm-log-test-" + std::to_string(getpid()) + ".log";
  set_log_file(path);
  on_ranks(make_thread_group(2),
           [&](int, std::shared_ptr<Bootstrap> bs) { Communicator::create(bs); });
  set_log_file("");
  set_log_level(LogLevel::kWarn);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  EXPECT_NE(text.str().find("[tpcomm info comm] rank 1 of 2: ready, plan "), std::string::npos)
      << text.str();
  EXPECT_THROW(set_log_file("/nonexistent-dir/x.log"), Error);
}

}  // namespace
}  // namespace tpcomm
