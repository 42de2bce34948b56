// A rank that closes its communicator normally tells its peers (docs/communicator.md, "Closing"):
// a peer's next call fails at once naming it, not at its deadline, while the call the closing
// rank completed still completes everywhere. Two ranks on threads, shm and Gloo.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/communicator_state.hpp"
#include "thread_ranks.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

void peer_learns_of_the_close(const std::vector<Backend>& disabled) {
  const auto group = make_thread_group(2);
  std::string error;
  std::chrono::steady_clock::duration took{};
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    o.disabled = disabled;
    auto comm = Communicator::create(bs, o);
    std::vector<float> v(1024, static_cast<float>(r + 1));
    comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(v[1023], 3.0f) << "rank " << r;
    if (r == 0) {
      comm.reset();  // closed right after its last call
      return;
    }
    std::this_thread::sleep_for(300ms);
    const auto start = std::chrono::steady_clock::now();
    try {
      comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    } catch (const Error& e) {
      error = e.what();
    }
    took = std::chrono::steady_clock::now() - start;
  });
  EXPECT_NE(error.find("rank 0 closed the communicator"), std::string::npos) << error;
  EXPECT_LT(took, 5s) << "the peer waited for its deadline: " << error;
}

TEST(CloseNotice, APeersNextShmCallFailsAtOnceNamingTheRankThatClosed) {
  peer_learns_of_the_close({});
}

TEST(CloseNotice, APeersNextGlooCallFailsAtOnceNamingTheRankThatClosed) {
  peer_learns_of_the_close({Backend::kShm});
}

}  // namespace
}  // namespace tpcomm
