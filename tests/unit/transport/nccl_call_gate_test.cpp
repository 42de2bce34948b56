// NCCL's call gate (src/transport/nccl/nccl_call_gate.hpp; docs/gpu.md, "One thread in the
// communicator at a time") with real threads: an abort never runs while a call is inside, runs
// once, and refuses every later call. Every wait here is bounded, so a broken gate fails instead of
// hanging.
#include "transport/nccl/nccl_call_gate.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {
namespace {

using namespace std::chrono_literals;
constexpr auto kBound = 10s;  // far above any real wait here

// A one-way signal between threads, waited for with a bound.
class Signal {
 public:
  void set() {
    std::lock_guard<std::mutex> lock(mutex_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, kBound, [&] { return set_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool set_ = false;
};

struct CountingGate {
  std::atomic<int> aborts{0};
  NcclCallGate gate{[this] { aborts.fetch_add(1); }};
};

TEST(NcclCallGate, AbortWithNoCallInsideRunsAtOnce) {
  CountingGate g;
  EXPECT_FALSE(g.gate.abort_requested());
  g.gate.request_abort("the test aborts");
  EXPECT_EQ(g.aborts.load(), 1);
  EXPECT_TRUE(g.gate.aborted());
  EXPECT_TRUE(g.gate.abort_requested());
  EXPECT_EQ(g.gate.abort_reason(), "the test aborts");
}

TEST(NcclCallGate, AbortDuringACallRunsAtItsLeaveAndNotBefore) {
  CountingGate g;
  Signal entered, requested;
  int aborts_before_leave = -1, aborts_after_leave = -1;
  std::thread call([&] {
    g.gate.enter("the test's call");
    entered.set();
    if (!requested.wait()) ADD_FAILURE() << "the abort was never requested";
    std::this_thread::sleep_for(50ms);  // time for a wrongly immediate abort to show
    aborts_before_leave = g.aborts.load();
    g.gate.leave();
    aborts_after_leave = g.aborts.load();
  });
  ASSERT_TRUE(entered.wait());
  g.gate.request_abort("the watchdog's timeout");
  EXPECT_EQ(g.aborts.load(), 0) << "aborted while a call was inside";
  EXPECT_FALSE(g.gate.aborted());
  requested.set();
  call.join();
  EXPECT_EQ(aborts_before_leave, 0);
  EXPECT_EQ(aborts_after_leave, 1) << "the call's leave did not perform the abort";
  EXPECT_TRUE(g.gate.aborted());
}

TEST(NcclCallGate, EnterAfterAnAbortIsRefusedNamingTheCallAndTheCause) {
  CountingGate g;
  g.gate.request_abort("rank 1 stopped");
  try {
    g.gate.enter("ncclAllReduce");
    g.gate.leave();
    FAIL() << "a call entered an aborted communicator";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAborted);
    EXPECT_NE(std::string(e.what()).find("ncclAllReduce was refused"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1 stopped"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(g.gate.try_enter());
  EXPECT_EQ(g.aborts.load(), 1);
}

TEST(NcclCallGate, EnterWhileAnAbortWaitsForACallIsRefused) {
  CountingGate g;
  g.gate.enter("the first call");
  g.gate.request_abort("aborted");
  EXPECT_THROW(g.gate.enter("a second call"), Error);
  EXPECT_FALSE(g.gate.try_enter());
  EXPECT_EQ(g.aborts.load(), 0);
  g.gate.leave();
  EXPECT_EQ(g.aborts.load(), 1);
}

TEST(NcclCallGate, ConcurrentAbortsRunTheActionOnce) {
  for (int round = 0; round < 200; ++round) {
    CountingGate g;
    const bool call_inside = round % 2 == 1;
    if (call_inside) g.gate.enter("a call");
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        g.gate.request_abort("thread " + std::to_string(t));
      });
    }
    go = true;
    if (call_inside) g.gate.leave();
    for (auto& th : threads) th.join();
    ASSERT_EQ(g.aborts.load(), 1) << "round " << round;
  }
}

TEST(NcclCallGate, ACallsWaitLoopSeesTheRequestAndLeaves) {
  CountingGate g;
  Signal entered;
  std::atomic<bool> saw_request{false};
  std::chrono::steady_clock::time_point stopped_waiting;
  std::thread call([&] {
    NcclCallGate::Call inside(g.gate, "a call polling ncclInProgress");
    entered.set();
    const auto give_up = std::chrono::steady_clock::now() + kBound;
    while (std::chrono::steady_clock::now() < give_up) {  // wait_ready's loop, in small
      if (g.gate.abort_requested()) {
        saw_request = true;
        break;
      }
      std::this_thread::sleep_for(200us);
    }
    stopped_waiting = std::chrono::steady_clock::now();
  });
  ASSERT_TRUE(entered.wait());
  std::this_thread::sleep_for(20ms);
  const auto requested_at = std::chrono::steady_clock::now();
  g.gate.request_abort("Communicator::abort()");
  call.join();
  EXPECT_TRUE(saw_request.load());
  EXPECT_LT(stopped_waiting - requested_at, 2s);
  EXPECT_EQ(g.aborts.load(), 1);
}

TEST(NcclCallGate, CloseDestroysOnceAndLaterRequestsDoNothing) {
  CountingGate g;
  int destroys = 0;
  g.gate.close([&] { ++destroys; });
  g.gate.close([&] { ++destroys; });
  g.gate.request_abort("too late");
  EXPECT_EQ(destroys, 1);
  EXPECT_EQ(g.aborts.load(), 0) << "a destroyed communicator was aborted as well";
  try {
    g.gate.enter("ncclAllGather");
    FAIL() << "a call entered a destroyed communicator";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("destroyed"), std::string::npos) << e.what();
  }
}

TEST(NcclCallGate, CloseAfterAnAbortDoesNotDestroy) {
  CountingGate g;
  g.gate.request_abort("failed");
  int destroys = 0;
  g.gate.close([&] { ++destroys; });
  EXPECT_EQ(destroys, 0);
  EXPECT_EQ(g.aborts.load(), 1);
}

}  // namespace
}  // namespace tpcomm::transport
