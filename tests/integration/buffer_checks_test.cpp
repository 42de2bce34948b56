// Buffers a call cannot use, refused on the calling rank before anything reaches the peers
// (src/runtime/call_checks.hpp): an input and output that overlap other than in the exact
// in-place form (shm returned wrong data for them, to the caller and to a peer), and counts whose
// byte size does not fit in size_t (shm and hier crashed, a Gloo all-gather returned success).
// The refused rank's communicator stays usable; a peer that made a valid call meanwhile waits for
// it to its deadline and fails, as for any call a rank does not make, never with wrong data.
#include <gtest/gtest.h>

#include <cstring>
#include <latch>
#include <limits>
#include <string>
#include <vector>

#include "runtime/communicator_impl.hpp"
#include "simulated_nodes.hpp"
#include "thread_ranks.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

// A value that differs by rank and by element, exact in fp32 sums of a few ranks.
float rank_value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 97));
}

// Runs `call`, expecting kInvalidInput whose message contains `expect`.
template <typename Call>
void expect_refused(Call call, const std::string& expect, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << what << ": " << e.what();
  }
}

// Every valid form on every rank, every element checked: all_reduce, all_gather and
// reduce_scatter in place, then out of place.
void expect_valid_calls_work(Communicator& comm, std::size_t n) {
  const int w = comm.size();
  const int me = comm.rank();
  const auto uw = static_cast<std::size_t>(w);
  int wrong = 0;
  auto check = [&](float got, float want, const char* what, std::size_t i) {
    if (got != want && wrong++ < 5) {
      ADD_FAILURE() << "rank " << me << ": " << what << " n=" << n << " element " << i << " is "
                    << got << ", expected " << want;
    }
  };
  auto sum_of = [&](std::size_t i) {
    float s = 0;
    for (int r = 0; r < w; ++r) s += rank_value(r, i);
    return s;
  };
  std::vector<float> reduced(n);
  for (std::size_t i = 0; i < n; ++i) reduced[i] = rank_value(me, i);
  comm.all_reduce(reduced.data(), reduced.data(), n, DataType::kFloat32, ReduceOp::kSum);
  for (std::size_t i = 0; i < n; ++i) check(reduced[i], sum_of(i), "in-place all_reduce", i);

  std::vector<float> gathered(n * uw, -1.0f);
  float* mine = gathered.data() + static_cast<std::size_t>(me) * n;
  for (std::size_t i = 0; i < n; ++i) mine[i] = rank_value(me, i);
  comm.all_gather(mine, gathered.data(), n, DataType::kFloat32);
  for (std::size_t i = 0; i < n * uw; ++i)
    check(gathered[i], rank_value(static_cast<int>(i / n), i % n), "in-place all_gather", i);

  std::vector<float> full(n * uw);
  for (std::size_t i = 0; i < full.size(); ++i) full[i] = rank_value(me, i);
  std::vector<float> separate = full;
  float* block = full.data() + static_cast<std::size_t>(me) * n;
  comm.reduce_scatter(full.data(), block, n, DataType::kFloat32, ReduceOp::kSum);
  std::vector<float> out(n);
  comm.reduce_scatter(separate.data(), out.data(), n, DataType::kFloat32, ReduceOp::kSum);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t at = static_cast<std::size_t>(me) * n + i;
    check(block[i], sum_of(at), "in-place reduce_scatter", i);
    check(out[i], sum_of(at), "reduce_scatter", i);
  }
  EXPECT_EQ(wrong, 0) << "rank " << me << " n=" << n;
}

TEST(BufferChecks, APartialOverlapIsRefusedOnItsRankAndTheCommunicatorStaysUsable) {
  test::on_ranks(make_thread_group(3), [&](int me, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 3s;  // before the check, rank 1's calls waited for peers that never made them
    auto comm = Communicator::create(bs, o);
    ASSERT_EQ(comm->plan().ops.at(Op::kAllGather).table.front().backend, Backend::kShm);
    if (me == 1) {
      const std::size_t n = 1000;
      std::vector<float> buf(n * 4, 1.0f);
      float* whole = buf.data() + 8;  // room for the shifts below
      // One element off each exact in-place form.
      expect_refused(
          [&] { comm->all_reduce(whole + 1, whole, n, DataType::kFloat32, ReduceOp::kSum); },
          "input == output", "all_reduce with input = output + 1 element");
      expect_refused([&] { comm->all_gather(whole + n - 1, whole, n, DataType::kFloat32); },
                     "input == output + rank * count",
                     "all_gather with input = output + (count - 1) elements");
      expect_refused(
          [&] {
            comm->reduce_scatter(whole, whole + n + 1, n, DataType::kFloat32, ReduceOp::kSum);
          },
          "output == input + rank * count",
          "reduce_scatter with output = input + (count + 1) elements");
      EXPECT_FALSE(comm->aborted());
    }
    for (std::size_t n : {std::size_t{1000}, std::size_t{40000}}) expect_valid_calls_work(*comm, n);
  });
}

// The peer's side: rank 0 makes a valid all-gather while rank 1's, in place but one element off,
// is refused. Rank 0 waits for rank 1 until its deadline and fails naming it; it used to return
// success (and at times rank 1's element overwritten by its own: the campaign's corrupted peer).
TEST(BufferChecks, APeerOfARefusedCallFailsAtItsDeadlineNamingTheRankInsteadOfReturning) {
  std::latch rank0_done(1);
  test::on_ranks(make_thread_group(2), [&](int me, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 2s;
    auto comm = Communicator::create(bs, o);
    const std::size_t n = 40000;  // 320 KB of output: shm's single-copy all-gather
    std::vector<float> gathered(2 * n + 1, -1.0f);
    if (me == 0) {
      std::vector<float> in(n);
      for (std::size_t i = 0; i < n; ++i) in[i] = rank_value(0, i);
      try {
        comm->all_gather(in.data(), gathered.data(), n, DataType::kFloat32);
        ADD_FAILURE() << "rank 0's all_gather returned while rank 1's was refused";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 1 did not time out"), std::string::npos)
            << e.what();
      }
      rank0_done.count_down();
    } else {
      float* input = gathered.data() + n - 1;  // in place would be gathered.data() + n
      for (std::size_t i = 0; i < n; ++i) input[i] = rank_value(1, i);
      expect_refused([&] { comm->all_gather(input, gathered.data(), n, DataType::kFloat32); },
                     "overlap", "rank 1's all_gather one element before its block");
      rank0_done.wait();  // its communicator lives until rank 0 has given up on it
    }
  });
}

// Counts whose bytes do not fit in size_t, on every CPU backend: all_reduce's (count x 4), the
// larger buffer of all_gather and reduce_scatter (count x 4 x ranks: each buffer's count alone
// fits) and broadcast's. Each is refused on every rank, and the group goes on.
void expect_huge_counts_refused(Communicator& comm) {
  const auto w = static_cast<std::size_t>(comm.size());
  std::vector<float> in(64, 1.0f);
  std::vector<float> out(64, 0.0f);
  const std::string why = "does not fit in size_t";
  expect_refused(
      [&] {
        comm.all_reduce(in.data(), out.data(), kMax / 4 + 1, DataType::kFloat32, ReduceOp::kSum);
      },
      why, "all_reduce of 2^62 float32");
  expect_refused(
      [&] { comm.all_gather(in.data(), out.data(), kMax / (4 * w) + 1, DataType::kFloat32); }, why,
      "all_gather whose output overflows");
  expect_refused(
      [&] {
        comm.reduce_scatter(in.data(), out.data(), kMax / (4 * w) + 1, DataType::kFloat32,
                            ReduceOp::kSum);
      },
      why, "reduce_scatter whose input overflows");
  expect_refused([&] { comm.broadcast(out.data(), kMax / 4 + 1, DataType::kFloat32, 0); }, why,
                 "broadcast of 2^62 float32");
  EXPECT_FALSE(comm.aborted());
  expect_valid_calls_work(comm, 1001);
}

TEST(BufferChecks, CountsWhoseByteSizeOverflowsAreRefusedOnShm) {
  test::on_ranks(make_thread_group(2), [&](int, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = Communicator::create(bs, o);
    ASSERT_EQ(comm->plan().ops.at(Op::kAllGather).table.front().backend, Backend::kShm);
    expect_huge_counts_refused(*comm);
  });
}

TEST(BufferChecks, CountsWhoseByteSizeOverflowsAreRefusedOnGloo) {
  test::on_ranks(make_thread_group(2), [&](int, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    o.disabled = {Backend::kShm};  // Gloo carries every call
    auto comm = Communicator::create(bs, o);
    ASSERT_EQ(comm->plan().ops.at(Op::kAllGather).table.front().backend, Backend::kGloo);
    expect_huge_counts_refused(*comm);
  });
}

TEST(BufferChecks, CountsWhoseByteSizeOverflowsAreRefusedOnHier) {
  test::on_ranks(make_thread_group(4), [&](int, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = detail::create_communicator(bs, o, test::nodes_in_turn(2));
    ASSERT_EQ(comm->plan().ops.at(Op::kAllGather).table.front().backend, Backend::kHier);
    expect_huge_counts_refused(*comm);
  });
}

}  // namespace
}  // namespace tpcomm
