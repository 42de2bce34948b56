// Communicator::close() as a C++ contract (docs/communicator.md, "Closing"): from another thread
// while a call waits for a peer, it ends that call at once with an error naming the close (not at
// its deadline, never a crash), waits for it, and then every call is refused; the plan, the route
// and the statistics stay readable; a second close() is harmless. Two ranks on threads, shm and
// Gloo.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

struct Worker {
  std::atomic<int> calls{0};
  std::string error;
};

// Calls all_reduce on rank-dependent data, `limit` times or until a call fails; every result is
// checked.
void call_until_refused(Communicator& comm, int rank, int limit, Worker& w) {
  constexpr std::size_t kCount = 1 << 14;
  std::vector<float> v(kCount);
  try {
    for (int i = 0; i < limit; ++i) {
      for (std::size_t k = 0; k < kCount; ++k) v[k] = static_cast<float>((k % 97) + rank + i);
      comm.all_reduce(v.data(), v.data(), kCount, DataType::kFloat32, ReduceOp::kSum);
      for (std::size_t k = 0; k < kCount; ++k) {
        const float want = static_cast<float>(2 * ((k % 97) + i) + 1);
        if (v[k] != want) {
          w.error = "wrong sum at call " + std::to_string(i) + " element " + std::to_string(k);
          return;
        }
      }
      w.calls.fetch_add(1);
    }
  } catch (const Error& e) {
    w.error = e.what();
  }
}

void expect_refused_after_close(Communicator& comm, int r) {
  float x = 1.0f;
  try {
    comm.all_reduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
    ADD_FAILURE() << "rank " << r << ": a call after close() ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("this communicator was closed"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(comm.barrier(), Error);
  EXPECT_THROW(comm.abort("after close"), Error);
}

// Rank 1 makes 5 calls and stops; rank 0's worker goes on into a sixth, which waits for rank 1
// (until the 20 s deadline, were nothing to end it). Rank 0 closes from its main thread: the call
// must end at once with the close named, and close() return; rank 1 closes after.
void close_during_a_call(const std::vector<Backend>& disabled) {
  const auto group = make_thread_group(2);
  std::atomic<bool> rank0_closed{false};
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    o.disabled = disabled;
    auto comm = Communicator::create(bs, o);
    Worker w;
    std::thread worker([&] { call_until_refused(*comm, r, r == 0 ? 1000 : 5, w); });
    if (r == 1) {
      worker.join();
      EXPECT_EQ(w.calls.load(), 5) << w.error;
      while (!rank0_closed.load()) std::this_thread::sleep_for(1ms);
      comm->close();
      expect_refused_after_close(*comm, r);
      return;
    }
    while (w.calls.load() < 5) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(200ms);  // the sixth call is waiting for rank 1
    const auto start = std::chrono::steady_clock::now();
    comm->close();
    const auto took = std::chrono::steady_clock::now() - start;
    worker.join();  // close() returned: the call in flight had ended
    rank0_closed = true;
    EXPECT_LT(took, 5s) << "close() waited for the call's deadline";
    EXPECT_EQ(w.calls.load(), 5);
    EXPECT_NE(w.error.find("close() was called while a call was in flight"), std::string::npos)
        << "the call in flight ended with: " << w.error;
    EXPECT_TRUE(comm->closed());
    expect_refused_after_close(*comm, r);
    // What was agreed and counted stays readable; the backends are gone.
    EXPECT_EQ(comm->size(), 2);
    EXPECT_FALSE(comm->plan().digest.empty());
    EXPECT_EQ(comm->route(Op::kAllReduce, 4096, DataType::kFloat32, Mode::kEager).backend,
              comm->plan().ops.at(Op::kAllReduce).row_for(4096).backend);
    std::uint64_t counted = 0;
    for (const auto& row : comm->stats()) counted += row.calls;
    EXPECT_EQ(counted, 5u);
    EXPECT_TRUE(comm->stage_times().empty());
    comm->close();  // a second close() returns
  });
}

TEST(CloseInFlight, AShmCallWaitingForAPeerEndsAtOnceAndLaterCallsAreRefused) {
  close_during_a_call({});
}

TEST(CloseInFlight, AGlooCallWaitingForAPeerEndsAtOnceAndLaterCallsAreRefused) {
  close_during_a_call({Backend::kShm});
}

}  // namespace
}  // namespace tpcomm
