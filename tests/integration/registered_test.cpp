// Registered host buffers (Communicator::allocate / free, docs/registered.md), one thread per
// rank: calls whose inputs lie in them give the same bits as the same calls on ordinary memory
// and as a reference summed here in rank order, with peers reading them in place (the debug log
// says so); and what a caller can get wrong is an error on every rank, nothing leaked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>

#include <cstring>
#include <filesystem>
#include <mutex>
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
using test::ScopedEnv;
using test::TempFile;

float value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 0.37) + static_cast<float>(i % 977) * 0.011f;
}

// A tuning file that gives every size of every op to shm, all-reduce with `algorithm`.
class ShmTuning : public TempFile {
 public:
  ShmTuning(int world, const char* algorithm)
      : TempFile(R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu", "world_size": )" +
                 std::to_string(world) + R"(, "ops": {
      "all_reduce": [{"max_bytes": null, "use": [{"backend": "shm", "algorithm": ")" +
                 algorithm + R"("}]}],
      "all_gather": [{"max_bytes": null, "use": [{"backend": "shm"}]}],
      "reduce_scatter": [{"max_bytes": null, "use": [{"backend": "shm"}]}]}}]})") {}
};

// Counts the shm backend's "reads ... registered input in place" lines while alive.
class InPlaceLines {
 public:
  explicit InPlaceLines(std::string needle = "registered input in place")
      : needle_(std::move(needle)) {
    set_log_level(LogLevel::kDebug);
    set_log_sink([this](LogLevel, std::string_view subsystem, std::string_view message) {
      if (subsystem == "shm" && message.find(needle_) != std::string::npos) ++count;
    });
  }
  ~InPlaceLines() {
    set_log_sink(nullptr);
    set_log_level(LogLevel::kWarn);
  }
  std::atomic<int> count{0};

 private:
  std::string needle_;
};

// Every rank: all_reduce, all_gather and reduce_scatter of `n` float32 per rank from a
// registered buffer (at an offset, so not the allocation's start) — except rank `ordinary`,
// which passes ordinary memory — each checked element by element against a reference summed
// in rank order here.
void check_calls(int world, std::size_t n, int ordinary, const char* algorithm) {
  ShmTuning tuning(world, algorithm);
  ScopedEnv env("TPCOMM_TUNING", tuning.path().c_str());
  InPlaceLines lines;
  const std::size_t w = static_cast<std::size_t>(world);
  on_ranks(make_thread_group(world), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    const std::size_t offset = 16;  // elements into the allocation
    auto* reg = static_cast<float*>(comm->allocate((offset + n * w) * sizeof(float)));
    std::vector<float> plain(n * w);
    float* in = r == ordinary ? plain.data() : reg + offset;
    for (std::size_t i = 0; i < n * w; ++i) in[i] = value(r, i);
    auto sum = [&](std::size_t i) {
      float acc = value(0, i);
      for (int q = 1; q < world; ++q) acc += value(q, i);
      return acc;
    };
    std::vector<float> out(n * w, -1.0f);
    comm->all_reduce(in, out.data(), n, DataType::kFloat32, ReduceOp::kSum);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], sum(i)) << "all_reduce rank " << r << " " << i;
    comm->all_gather(in, out.data(), n, DataType::kFloat32);
    for (std::size_t i = 0; i < n * w; ++i)
      ASSERT_EQ(out[i], value(static_cast<int>(i / n), i % n))
          << "all_gather rank " << r << " " << i;
    comm->reduce_scatter(in, out.data(), n, DataType::kFloat32, ReduceOp::kSum);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], sum(static_cast<std::size_t>(r) * n + i)) << "reduce_scatter rank " << r;
    // The registered input is unchanged: nobody wrote into a peer's buffer.
    for (std::size_t i = 0; i < n * w; ++i) ASSERT_EQ(in[i], value(r, i));
    comm->free(reg);
  });
  EXPECT_EQ(lines.count.load(), world)
      << "each rank logs once that it read a registered input in place";
}

TEST(Registered, OneShotReadsPeersInputsInPlaceAndAgreesWithTheReference) {
  check_calls(3, 100'000, -1, "one_shot");  // 1.2 MB per rank: several lanes
}

TEST(Registered, TwoShotReadsPeersInputsInPlaceAndAgreesWithTheReference) {
  check_calls(3, 100'000, -1, "two_shot");
}

TEST(Registered, ARankWithOrdinaryMemoryAmongRegisteredOnesIsCopiedAsBefore) {
  check_calls(2, 30'000, 1, "one_shot");
}

TEST(Registered, InPlaceOneShotAndSmallCallsStayRight) {
  ShmTuning tuning(2, "one_shot");
  ScopedEnv env("TPCOMM_TUNING", tuning.path().c_str());
  on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    for (std::size_t n :
         {std::size_t{100}, std::size_t{70'000}}) {  // below and above the in-place minimum
      auto* buf = static_cast<float*>(comm->allocate(n * sizeof(float)));
      for (std::size_t i = 0; i < n; ++i) buf[i] = value(r, i);
      comm->all_reduce(buf, buf, n, DataType::kFloat32, ReduceOp::kSum);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(buf[i], value(0, i) + value(1, i)) << n << " " << i;
      comm->free(buf);
    }
  });
}

// Calls are served one at a time (docs/communicator.md, "Threads"): a free from another thread
// waits for the call that reads the buffer, instead of unmapping it under that call.
TEST(Registered, FreeFromAnotherThreadWaitsForTheCallThatReadsTheBuffer) {
  ShmTuning tuning(2, "one_shot");
  ScopedEnv env("TPCOMM_TUNING", tuning.path().c_str());
  constexpr std::size_t n = 50'000;
  on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    auto* buf = static_cast<float*>(comm->allocate(n * sizeof(float)));
    for (std::size_t i = 0; i < n; ++i) buf[i] = value(r, i);
    std::vector<float> out(n);
    if (r == 0) {
      // Rank 0's call waits for rank 1, which starts late; rank 0 frees from another thread
      // meanwhile. The call's result is written before its turn ends, and the free's turn
      // begins after that (the queue's mutex orders the two): so once free returns, the whole
      // result is there to read, or free ran under the call.
      std::thread call(
          [&] { comm->all_reduce(buf, out.data(), n, DataType::kFloat32, ReduceOp::kSum); });
      // The call thread takes its turn within microseconds; half a second covers a loaded
      // machine and the sanitizer build (rank 1 starts its call a second after that).
      std::this_thread::sleep_for(500ms);
      comm->free(buf);
      std::size_t ready = 0;
      while (ready < n && out[ready] == value(0, ready) + value(1, ready)) ++ready;
      EXPECT_EQ(ready, n) << "free returned before the call that reads the buffer had finished";
      call.join();
    } else {
      std::this_thread::sleep_for(1500ms);
      comm->all_reduce(buf, out.data(), n, DataType::kFloat32, ReduceOp::kSum);
      comm->free(buf);
    }
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], value(0, i) + value(1, i)) << r << " " << i;
  });
}

TEST(Registered, TooLargeAMismatchAndAStrangePointerAreErrorsOnEveryRankAndTheGroupGoesOn) {
  auto group = make_thread_group(2);
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    try {
      comm->allocate(std::size_t{1} << 44);  // 16 TiB
      ADD_FAILURE() << "16 TiB allocated";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
      EXPECT_NE(std::string(e.what()).find("/dev/shm"), std::string::npos) << e.what();
    }
    try {
      comm->allocate(r == 0 ? 4096 : 8192);
      ADD_FAILURE() << "sizes that differ were allocated";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("allocate is collective with one size"),
                std::string::npos)
          << e.what();
    }
    int local = 0;
    try {
      comm->free(r == 1 ? &local : nullptr);
      ADD_FAILURE() << "a pointer allocate did not return was freed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a buffer allocate() of this communicator returned"),
                std::string::npos)
          << e.what();
    }
    // Still usable, and what it hands out now works.
    auto* buf = static_cast<float*>(comm->allocate(64 << 10));
    for (std::size_t i = 0; i < 16384; ++i) buf[i] = value(r, i);
    std::vector<float> out(16384);
    comm->all_reduce(buf, out.data(), 16384, DataType::kFloat32, ReduceOp::kMax);
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], value(1, i));
    comm->free(buf);
  });
}

// The built-in W = 2 plan steps all-reduces above 256 KiB by 128 KiB for the lanes' sake; a call
// whose every input is registered widens its steps after the first (in_place_step). 300'001
// floats: a 128 KiB step, then wide ones, then a partial one; every element checked, with every
// rank registered (logged once per rank) and with one ordinary rank (steps stay narrow).
TEST(Registered, AllRegisteredCallsWidenTheirStepsAfterTheFirstAndStayRight) {
  for (int ordinary : {-1, 1}) {
    InPlaceLines wide("every input in place: steps of 524288 B after the first");
    on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
      auto comm = Communicator::create(bs);
      const std::size_t n = 300'001;
      ASSERT_EQ(comm->route(Op::kAllReduce, n * 4, DataType::kFloat32, Mode::kEager).step_bytes,
                std::optional<std::uint64_t>(128u << 10));
      auto* reg = static_cast<float*>(comm->allocate(n * sizeof(float)));
      std::vector<float> plain(n), out(n, -1.0f);
      float* in = r == ordinary ? plain.data() : reg;
      for (int call = 0; call < 3; ++call) {
        for (std::size_t i = 0; i < n; ++i) in[i] = value(r, i + static_cast<std::size_t>(call));
        comm->all_reduce(in, out.data(), n, DataType::kFloat32, ReduceOp::kSum);
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t k = i + static_cast<std::size_t>(call);
          ASSERT_EQ(out[i], value(0, k) + value(1, k))
              << "rank " << r << " call " << call << " " << i;
        }
      }
      comm->free(reg);
    });
    EXPECT_EQ(wide.count.load(), ordinary < 0 ? 2 : 0) << "ordinary rank " << ordinary;
  }
}

TEST(Registered, BuffersLeftAllocatedGoWithTheCommunicatorAndLeaveNoSegment) {
  auto segments = [] {
    int n = 0;
    const std::string mine = "tpcomm-buf-" + std::to_string(getpid()) + "-";
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
      n += e.path().filename().string().rfind(mine, 0) == 0;
    return n;
  };
  on_ranks(make_thread_group(2), [&](int, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    for (int i = 0; i < 3; ++i) comm->allocate(4096);
  });
  EXPECT_EQ(segments(), 0) << "segment names are removed once every rank mapped them";
}

}  // namespace
}  // namespace tpcomm
