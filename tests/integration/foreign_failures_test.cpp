// Failures inside the library that are not tpcomm::Error (std::bad_alloc here, injected with
// TPCOMM_FAULT=STEP:oom@RANK): they leave the API as tpcomm::Error, and a call's failure aborts
// the communicator so that the peers are told at once instead of waiting out their deadline.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Rank 1's second call throws std::bad_alloc inside; each rank's error and how long its second
// call took.
void out_of_memory_in_a_call(const CommunicatorOptions& options) {
  test::ScopedEnv fault("TPCOMM_FAULT", "call:oom@1#2");
  test::ScopedEnv timeout("TPCOMM_TIMEOUT_MS", "30000");
  std::vector<std::string> what(2);
  std::vector<ErrorCode> code(2, ErrorCode::kInternal);
  std::vector<Clock::duration> took(2);
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs, options);
    std::vector<float> v(4096, static_cast<float>(r + 1));
    comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    for (float x : v) ASSERT_EQ(x, 3.0f);
    const auto start = Clock::now();
    try {
      comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
      what[r] = "returned";
    } catch (const Error& e) {
      what[r] = e.what();
      code[r] = e.code();
    } catch (const std::exception& e) {
      what[r] = std::string("not a tpcomm::Error: ") + e.what();
    }
    took[r] = Clock::now() - start;
    EXPECT_TRUE(comm->aborted()) << "rank " << r;
  });
  EXPECT_EQ(code[1], ErrorCode::kUnavailable) << what[1];
  EXPECT_NE(what[1].find("rank 1: all_reduce failed: out of memory"), std::string::npos) << what[1];
  // Rank 0 hears of it through the abort, long before its 30 s deadline.
  EXPECT_NE(what[0], "returned");
  EXPECT_LT(took[0], 10s) << what[0];
  EXPECT_NE(what[0].find("rank 1"), std::string::npos) << what[0];
}

TEST(ForeignFailures, OutOfMemoryInAnShmCallIsAnErrorAndAbortsTheGroup) {
  out_of_memory_in_a_call({});
}

TEST(ForeignFailures, OutOfMemoryInAGlooCallIsAnErrorAndAbortsTheGroup) {
  CommunicatorOptions gloo_only;
  gloo_only.disabled = {Backend::kShm};
  out_of_memory_in_a_call(gloo_only);
}

// During creation: the rank's Communicator::create throws tpcomm::Error, and its peers fail their
// next step naming it.
TEST(ForeignFailures, OutOfMemoryDuringCreationIsAnErrorOnEveryRank) {
  test::ScopedEnv fault("TPCOMM_FAULT", "facts:oom@1");
  test::ScopedEnv timeout("TPCOMM_TIMEOUT_MS", "2000");
  std::vector<std::string> what(2);
  std::vector<int> is_error(2, 0);
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    try {
      Communicator::create(bs);
      what[r] = "created";
    } catch (const Error& e) {
      what[r] = e.what();
      is_error[r] = 1;
    } catch (const std::exception& e) {
      what[r] = std::string("not a tpcomm::Error: ") + e.what();
    }
  });
  EXPECT_EQ(is_error, (std::vector<int>{1, 1})) << what[0] << " | " << what[1];
  EXPECT_NE(what[1].find("rank 1: Communicator::create failed: out of memory"), std::string::npos)
      << what[1];
  EXPECT_NE(what[0].find("rank 1"), std::string::npos) << what[0];
}

}  // namespace
}  // namespace tpcomm
