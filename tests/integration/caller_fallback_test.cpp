// CommunicatorOptions::caller_serves_fallback: an engine with its own NCCL (here: Gloo on CPU)
// communicator keeps the fallback's calls, so tpcomm sets no fallback up and refuses a call the
// plan gives it, on every rank alike and at once, while its own backends' calls run.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/communicator_state.hpp"
#include "thread_ranks.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

TEST(CallerServesFallback, TheFallbackIsNotSetUpAndItsCallsAreRefusedOnEveryRank) {
  const auto group = make_thread_group(2);
  const auto errors = test::errors_on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    o.disabled = {Backend::kShm};  // every row is Gloo's, the fallback's
    o.caller_serves_fallback = true;
    auto comm = Communicator::create(bs, o);
    EXPECT_EQ(comm->plan().ops.at(Op::kAllReduce).row_for(4096).backend, Backend::kGloo);
    std::vector<float> v(1024, static_cast<float>(r + 1));
    const auto start = std::chrono::steady_clock::now();
    try {
      comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.what();
      EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "refused before anything waits";
      EXPECT_EQ(v[0], static_cast<float>(r + 1)) << "nothing was sent or written";
      EXPECT_FALSE(comm->aborted()) << "a refusal, not a failure";
      EXPECT_TRUE(comm->stats().empty());
      throw;
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("the plan gives it to gloo, which the caller serves"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

TEST(CallerServesFallback, CallsOfTpcommsOwnBackendsRun) {
  const auto group = make_thread_group(2);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    o.caller_serves_fallback = true;
    auto comm = Communicator::create(bs, o);
    std::vector<float> v(1024, static_cast<float>(r + 1));
    comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    for (float x : v) ASSERT_EQ(x, 3.0f) << "rank " << r;
    EXPECT_EQ(comm->stats().at(0).backend, Backend::kShm);
  });
}

}  // namespace
}  // namespace tpcomm
