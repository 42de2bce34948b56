// Calls split over each rank's thread team (TPCOMM_THREADS, CommunicatorOptions::threads), one
// thread per rank: every algorithm of every operation, forced from the first byte on by a tuning
// file's team_min_bytes of 0, over sizes of several lane steps with shares that do not divide
// them evenly, gives a reference summed here in rank order element by element, and the same bits
// with teams of 1, 2 and 3 threads (bfloat16 averages included, where rounding would show a
// changed order). The debug log names each rank's team, and a bad option is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/log.hpp"

namespace tpcomm {
namespace {

using test::on_ranks;
using test::ScopedEnv;
using test::TempFile;

float value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 0.37) + static_cast<float>(i % 977) * 0.011f;
}

// Every op to shm, all-reduce with `algorithm`, all-gather with `gather`, teams from 0 bytes.
class TeamTuning : public TempFile {
 public:
  TeamTuning(int world, const char* algorithm, const char* gather)
      : TempFile(R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu", "world_size": )" +
                 std::to_string(world) + R"(, "team_min_bytes": 0, "ops": {
      "all_reduce": [{"max_bytes": null, "use": [{"backend": "shm", "algorithm": ")" +
                 algorithm + R"("}]}],
      "all_gather": [{"max_bytes": null, "use": [{"backend": "shm", "algorithm": ")" +
                 gather +
                 R"("}]}],
      "reduce_scatter": [{"max_bytes": null, "use": [{"backend": "shm"}]}]}}]})") {}
};

// Counts the shm backend's "team of <threads> threads" lines while alive.
class TeamLines {
 public:
  explicit TeamLines(int threads) : needle_("team of " + std::to_string(threads) + " thread") {
    set_log_level(LogLevel::kDebug);
    set_log_sink([this](LogLevel, std::string_view subsystem, std::string_view message) {
      if (subsystem == "shm" && message.find(needle_) != std::string_view::npos) ++count;
    });
  }
  ~TeamLines() {
    set_log_sink(nullptr);
    set_log_level(LogLevel::kWarn);
  }
  std::atomic<int> count{0};

 private:
  std::string needle_;
};

// Rank r's outputs of the three ops, bytes as they came back.
struct Outputs {
  std::vector<float> reduced, gathered, scattered;
  std::vector<std::uint16_t> bf16_avg;
};

std::vector<Outputs> run_calls(int world, int threads, std::size_t n) {
  std::vector<Outputs> out(static_cast<std::size_t>(world));
  const auto w = static_cast<std::size_t>(world);
  on_ranks(make_thread_group(world), [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.threads = threads;
    auto comm = Communicator::create(bs, o);
    Outputs& mine = out[static_cast<std::size_t>(r)];
    std::vector<float> in(n * w);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = value(r, i);
    mine.reduced.assign(n, -1.0f);
    comm->all_reduce(in.data(), mine.reduced.data(), n, DataType::kFloat32, ReduceOp::kSum);
    mine.gathered.assign(n * w, -1.0f);
    comm->all_gather(in.data(), mine.gathered.data(), n, DataType::kFloat32);
    mine.scattered.assign(n, -1.0f);
    comm->reduce_scatter(in.data(), mine.scattered.data(), n, DataType::kFloat32, ReduceOp::kSum);
    std::vector<std::uint16_t> bf(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t b;
      std::memcpy(&b, &in[i], 4);
      bf[i] = static_cast<std::uint16_t>(b >> 16);
    }
    mine.bf16_avg.assign(n, 0);
    comm->all_reduce(bf.data(), mine.bf16_avg.data(), n, DataType::kBFloat16, ReduceOp::kAvg);
  });
  return out;
}

void check_against_reference(const std::vector<Outputs>& out, int world, std::size_t n) {
  const auto w = static_cast<std::size_t>(world);
  auto sum = [&](std::size_t i) {
    float acc = value(0, i);
    for (int q = 1; q < world; ++q) acc += value(q, i);
    return acc;
  };
  for (std::size_t r = 0; r < w; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[r].reduced[i], sum(i)) << "all_reduce rank " << r << " element " << i;
      ASSERT_EQ(out[r].scattered[i], sum(r * n + i)) << "reduce_scatter rank " << r << " " << i;
    }
    for (std::size_t i = 0; i < n * w; ++i) {
      ASSERT_EQ(out[r].gathered[i], value(static_cast<int>(i / n), i % n))
          << "all_gather rank " << r << " element " << i;
    }
  }
}

void check_threads_agree(int world, const char* algorithm, const char* gather) {
  const TeamTuning tuning(world, algorithm, gather);
  const ScopedEnv env("TPCOMM_TUNING", tuning.path().c_str());
  const ScopedEnv spin("TPCOMM_SHM_SPIN_US", "0");  // ranks and teams outnumber the cores
  // Several lane steps of 512 KiB, and shares that are not multiples of a vector.
  const std::size_t n = 300'001;
  std::vector<Outputs> first;
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(std::string(algorithm) + ", " + std::to_string(world) + " ranks, " +
                 std::to_string(threads) + " threads");
    TeamLines lines(threads);
    const auto out = run_calls(world, threads, n);
    EXPECT_EQ(lines.count.load(), world) << "every rank's debug log names its team";
    check_against_reference(out, world, n);
    if (first.empty()) {
      first = out;
      continue;
    }
    for (std::size_t r = 0; r < out.size(); ++r) {
      EXPECT_EQ(out[r].bf16_avg, first[r].bf16_avg) << "bfloat16 avg, rank " << r;
    }
  }
}

TEST(TeamCalls, OneShotAndLaneAllGatherGiveTheSameBitsForEveryTeamSize) {
  check_threads_agree(2, "one_shot", "one_shot");
}

TEST(TeamCalls, TwoShotGivesTheSameBitsForEveryTeamSize) {
  check_threads_agree(3, "two_shot", "one_shot");
}

TEST(TeamCalls, SingleCopyGivesTheSameBitsForEveryTeamSize) {
  check_threads_agree(2, "single_copy", "single_copy");
}

TEST(TeamCalls, ANegativeThreadCountIsRefusedOnEveryRank) {
  const auto errors = test::errors_on_ranks(make_thread_group(2), [](int, auto bs) {
    CommunicatorOptions o;
    o.threads = -1;
    Communicator::create(bs, o);
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("CommunicatorOptions::threads = -1"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace tpcomm
