// Buffers a call cannot use, refused on the calling rank before anything reaches the peers
// (src/runtime/call_checks.hpp): an input and output that overlap other than in the exact
// in-place form (shm returned wrong data for them, to the caller and to a peer), and counts whose
// byte size does not fit in size_t (shm and hier crashed, a Gloo all-gather returned success).
// A refusal aborts the refused rank's communicator, so that a peer that made a valid call
// meanwhile fails at once naming the refusal, instead of waiting out its deadline (or, before the
// check, returning wrong data); a refusal every rank meets leaves no rank waiting either.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/communicator_state.hpp"
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

// Rank 1 passes each of `forms` (one element off an exact in-place form) on a fresh communicator
// of 3 ranks while ranks 0 and 2 make the valid call: rank 1 is refused, ranks 0 and 2 fail long
// before their 20 s deadline naming rank 1's refusal, and nobody returns success.
TEST(BufferChecks, APartialOverlapIsRefusedAndItsPeersAreToldAtOnce) {
  const std::size_t n = 1000;
  // The call every rank makes: rank 1 one element off the exact in-place form (shift != 0).
  struct Form {
    const char* what;
    const char* says;
    std::function<void(Communicator&, float*, std::ptrdiff_t)> call;
  };
  const std::vector<Form> forms = {
      {"all_reduce with input = output + 1 element", "input == output",
       [&](Communicator& c, float* b, std::ptrdiff_t shift) {
         c.all_reduce(b + shift, b, n, DataType::kFloat32, ReduceOp::kSum);
       }},
      {"all_gather with input = output + (rank * count - 1) elements",
       "input == output + rank * count",
       [&](Communicator& c, float* b, std::ptrdiff_t shift) {
         c.all_gather(b + c.rank() * static_cast<std::ptrdiff_t>(n) + shift, b, n,
                      DataType::kFloat32);
       }},
      {"reduce_scatter with output = input + (rank * count + 1) elements",
       "output == input + rank * count",
       [&](Communicator& c, float* b, std::ptrdiff_t shift) {
         c.reduce_scatter(b, b + c.rank() * static_cast<std::ptrdiff_t>(n) - shift, n,
                          DataType::kFloat32, ReduceOp::kSum);
       }},
  };
  for (const auto& form : forms) {
    std::vector<std::string> what(3);
    std::vector<ErrorCode> code(3, ErrorCode::kInternal);
    std::vector<std::chrono::steady_clock::duration> took(3);
    test::on_ranks(make_thread_group(3), [&](int me, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.timeout = 20s;
      auto comm = Communicator::create(bs, o);
      ASSERT_EQ(comm->plan().ops.at(Op::kAllGather).table.front().backend, Backend::kShm);
      std::vector<float> buf(n * 5, 1.0f);
      const auto start = std::chrono::steady_clock::now();
      try {
        form.call(*comm, buf.data() + 8, me == 1 ? -1 : 0);
        what[me] = "returned";
      } catch (const Error& e) {
        what[me] = e.what();
        code[me] = e.code();
      }
      took[me] = std::chrono::steady_clock::now() - start;
      EXPECT_TRUE(comm->aborted()) << form.what << ": rank " << me;
    });
    EXPECT_EQ(code[1], ErrorCode::kInvalidInput) << form.what << ": " << what[1];
    EXPECT_NE(what[1].find(form.says), std::string::npos) << form.what << ": " << what[1];
    for (int peer : {0, 2}) {
      EXPECT_NE(what[peer], "returned") << form.what << ": rank " << peer;
      EXPECT_LT(took[peer], 10s) << form.what << ": rank " << peer << ": " << what[peer];
      EXPECT_NE(what[peer].find("rank 1"), std::string::npos) << form.what << ": " << what[peer];
    }
  }
}

// The peer's side in the campaign's case: rank 0 makes a valid all-gather (shm's single-copy path)
// while rank 1's, in place but one element off, is refused. Rank 0 used to return success (at
// times with rank 1's block overwritten by its own: the corrupted peer); now it fails at once,
// and its message carries rank 1's refusal.
TEST(BufferChecks, APeerOfARefusedCallFailsAtOnceNamingTheRefusal) {
  test::on_ranks(make_thread_group(2), [&](int me, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = Communicator::create(bs, o);
    const std::size_t n = 40000;  // 320 KB of output: shm's single-copy all-gather
    std::vector<float> gathered(2 * n + 1, -1.0f);
    if (me == 0) {
      std::vector<float> in(n);
      for (std::size_t i = 0; i < n; ++i) in[i] = rank_value(0, i);
      const auto start = std::chrono::steady_clock::now();
      try {
        comm->all_gather(in.data(), gathered.data(), n, DataType::kFloat32);
        ADD_FAILURE() << "rank 0's all_gather returned while rank 1's was refused";
      } catch (const Error& e) {
        EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << e.what();
        EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
      }
    } else {
      float* input = gathered.data() + n - 1;  // in place would be gathered.data() + n
      for (std::size_t i = 0; i < n; ++i) input[i] = rank_value(1, i);
      expect_refused([&] { comm->all_gather(input, gathered.data(), n, DataType::kFloat32); },
                     "overlap", "rank 1's all_gather one element before its block");
    }
  });
}

// Counts whose bytes do not fit in size_t, on every CPU backend: all_reduce's (count x 4), the
// larger buffer of all_gather and reduce_scatter (count x 4 x ranks: each buffer's count alone
// fits) and broadcast's. Each is refused on every rank (so no rank waits for another), on a
// communicator of its own, since a refusal aborts it.
template <typename Make>
void expect_huge_counts_refused(std::shared_ptr<Bootstrap> bs, Make make) {
  const std::string why = "does not fit in size_t";
  std::vector<float> in(64, 1.0f);
  std::vector<float> out(64, 0.0f);
  for (int which = 0; which < 4; ++which) {
    auto comm = make(bs);
    const auto w = static_cast<std::size_t>(comm->size());
    expect_refused(
        [&] {
          if (which == 0) {
            comm->all_reduce(in.data(), out.data(), kMax / 4 + 1, DataType::kFloat32,
                             ReduceOp::kSum);
          } else if (which == 1) {
            comm->all_gather(in.data(), out.data(), kMax / (4 * w) + 1, DataType::kFloat32);
          } else if (which == 2) {
            comm->reduce_scatter(in.data(), out.data(), kMax / (4 * w) + 1, DataType::kFloat32,
                                 ReduceOp::kSum);
          } else {
            comm->broadcast(out.data(), kMax / 4 + 1, DataType::kFloat32, 0);
          }
        },
        why,
        "case " + std::to_string(which) + " (all_reduce, all_gather, reduce_scatter, broadcast)");
    EXPECT_TRUE(comm->aborted());
  }
}

// expect_huge_counts_refused on `ranks` thread ranks whose communicators plan `backend`.
void huge_counts_over(int ranks, CommunicatorOptions o, const runtime::Platform& platform,
                      Backend backend) {
  o.timeout = 20s;
  test::on_ranks(make_thread_group(ranks), [&](int, std::shared_ptr<Bootstrap> bs) {
    expect_huge_counts_refused(bs, [&](std::shared_ptr<Bootstrap> b) {
      auto comm = runtime::create_communicator(b, o, platform);
      EXPECT_EQ(comm->plan().ops.at(Op::kAllGather).table.front().backend, backend);
      return comm;
    });
  });
}

TEST(BufferChecks, CountsWhoseByteSizeOverflowsAreRefusedOnShm) {
  huge_counts_over(2, {}, runtime::builtin_platform(), Backend::kShm);
}

TEST(BufferChecks, CountsWhoseByteSizeOverflowsAreRefusedOnGloo) {
  CommunicatorOptions gloo_only;
  gloo_only.disabled = {Backend::kShm};  // Gloo carries every call
  huge_counts_over(2, gloo_only, runtime::builtin_platform(), Backend::kGloo);
}

TEST(BufferChecks, CountsWhoseByteSizeOverflowsAreRefusedOnHier) {
  huge_counts_over(4, {}, test::nodes_in_turn(2), Backend::kHier);
}

}  // namespace
}  // namespace tpcomm
