// Deterministic mode (CommunicatorOptions::deterministic, TPCOMM_DETERMINISTIC): every reduction
// sums in rank order 0..W-1. Property tests over random slices [a, b): all_reduce(x)[a:b] bitwise
// equal to all_reduce(x[a:b]), reduce_scatter likewise, every rank's bits equal, and equal to a
// rank-order reference computed here (fp32 accumulation from the rounded inputs, one rounding);
// on shm (W = 2, 3, 4; a team of two), gloo (W = 2, 3, 4) and hier (4 ranks on two simulated
// nodes), float32, bfloat16 and float16, with each reduction variant (ctest runs the
// suite under every TPCOMM_CPU_KERNELS; hier_mpi's run is the process tier's, under mpirun).
// Without the mode shm keeps the same order; every backend gives every rank the same bits, each
// element a sum accumulated in fp32 and rounded once (in some order: checked against every
// order at W = 3 and 4). The mode is in the plan and its digest: ranks that disagree are refused
// at set-up.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "plan/plan_text.hpp"
#include "runtime/communicator_state.hpp"
#include "simulated_nodes.hpp"
#include "support/typed_values.hpp"
#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16};

using test::encode;
using test::order_value;
using test::order_values;
using test::rank_order_sums;

float to_type(DataType t, float f) {
  return test::rounded(t, f);
}

struct Slice {
  std::size_t a, b;
};

// The same slices on every rank (a fixed seed).
std::vector<Slice> slices(std::size_t n) {
  std::mt19937_64 g(7);
  std::vector<Slice> out = {{0, n}, {0, 1}, {n - 1, n}};
  for (int k = 0; k < 5; ++k) {
    std::size_t a = g() % n, b = g() % n;
    if (a > b) std::swap(a, b);
    out.push_back({a, b + 1});
  }
  return out;
}

// Every fp32 value a sum of the ranks in `set` (a bit mask) can take: one per way of adding them
// up pairwise (any order, any tree), each addition rounded to fp32.
std::vector<float> fp32_sums(const std::vector<float>& x, unsigned set) {
  if ((set & (set - 1)) == 0) return {x[static_cast<std::size_t>(__builtin_ctz(set))]};
  std::vector<float> out;
  const unsigned low = set & -set;  // in the first part, so each split counts once
  for (unsigned a = (set - 1) & set; a != 0; a = (a - 1) & set) {
    if ((a & low) == 0) continue;
    for (float u : fp32_sums(x, a)) {
      for (float v : fp32_sums(x, set & ~a)) out.push_back(u + v);
    }
  }
  return out;
}

// Without the mode (W = 3 and 4): elements that are no sum in fp32 rounded once to the type,
// whatever the order; a backend that rounded a partial sum to a 16-bit type (a rounding per hop)
// gives such elements.
std::size_t not_one_rounding(DataType t, int world, const std::vector<std::uint8_t>& got) {
  std::size_t wrong = 0;
  std::vector<float> x(static_cast<std::size_t>(world));
  for (std::size_t i = 0; i < got.size() / size_of(t); ++i) {
    for (int r = 0; r < world; ++r) x[static_cast<std::size_t>(r)] = order_value(t, r, i);
    const float v = test::load(t, got, i);
    bool any = false;
    for (float sum : fp32_sums(x, (1u << world) - 1)) any = any || to_type(t, sum) == v;
    if (!any) ++wrong;
  }
  return wrong;
}

// Every rank's results of the calls (in order) on the route `make` builds; `checked` whether
// the rank-order reference applies.
using Make = std::function<std::unique_ptr<Communicator>(std::shared_ptr<Bootstrap>)>;

void check_properties(int world, const Make& make, bool rank_order, const std::string& route) {
  const std::size_t n = 70001;  // several lane steps of shm; past gloo's inline room
  std::vector<std::vector<std::vector<std::uint8_t>>> got(static_cast<std::size_t>(world));
  // The backend the route's name starts with carries every call (so the name is the truth).
  const std::string backend = route.substr(0, route.find_first_of(" ,"));
  test::on_ranks(make_thread_group(world), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = make(std::move(bs));
    auto carrier = [&](Op op, std::size_t bytes) {
      return std::string(to_string(comm->plan().ops.at(op).row_for(bytes).backend));
    };
    auto& mine = got[static_cast<std::size_t>(r)];
    const auto w = static_cast<std::size_t>(world);
    for (DataType t : kTypes) {
      const std::size_t es = size_of(t);
      for (const Slice& s : slices(n)) {
        const std::size_t len = s.b - s.a;
        // all_reduce of the slice
        std::vector<std::uint8_t> x = order_values(t, r, s.a, len), out(len * es);
        comm->all_reduce(x.data(), out.data(), len, t, ReduceOp::kSum);
        EXPECT_EQ(carrier(Op::kAllReduce, len * es), backend) << route;
        mine.push_back(out);
        // reduce_scatter: block q of this rank's input is elements [q n + a, q n + b) of its
        // vector, so rank r's result is the sum of elements [r n + a, r n + b).
        std::vector<std::uint8_t> in;
        for (std::size_t q = 0; q < w; ++q) {
          const auto block = order_values(t, r, q * n + s.a, len);
          in.insert(in.end(), block.begin(), block.end());
        }
        std::vector<std::uint8_t> block_out(len * es);
        comm->reduce_scatter(in.data(), block_out.data(), len, t, ReduceOp::kSum);
        EXPECT_EQ(carrier(Op::kReduceScatter, in.size()), backend) << route;
        mine.push_back(block_out);
      }
    }
  });
  // Every rank's all_reduce bits equal rank 0's; the slices are the whole call's bits, which
  // are the rank-order reference's where the route keeps rank order.
  std::size_t k = 0;
  for (DataType t : kTypes) {
    const std::size_t es = size_of(t);
    const std::vector<std::uint8_t>& whole = got[0][k];  // slice {0, n}: the whole vector
    const auto want = rank_order_sums(t, world, 0, n);
    if (rank_order) {
      EXPECT_EQ(whole, want) << route << " " << to_string(t) << ": not rank order";
    } else {
      EXPECT_EQ(not_one_rounding(t, world, whole), 0u)
          << route << " " << to_string(t) << ": elements not summed in fp32 and rounded once";
    }
    for (const Slice& s : slices(n)) {
      SCOPED_TRACE(route + " " + std::string(to_string(t)) + " [" + std::to_string(s.a) + ", " +
                   std::to_string(s.b) + ")");
      for (int r = 0; r < world; ++r) {
        const auto& mine = got[static_cast<std::size_t>(r)];
        EXPECT_EQ(mine[k], got[0][k]) << "rank " << r << "'s all_reduce differs from rank 0's";
        if (rank_order) {
          const std::vector<std::uint8_t> part(whole.begin() + s.a * es, whole.begin() + s.b * es);
          EXPECT_EQ(mine[k], part) << "rank " << r << ": all_reduce(x[a:b]) != all_reduce(x)[a:b]";
          const auto block =
              rank_order_sums(t, world, static_cast<std::size_t>(r) * n + s.a, s.b - s.a);
          EXPECT_EQ(mine[k + 1], block) << "rank " << r << "'s reduce_scatter block";
        }
      }
      k += 2;
    }
  }
}

// ctest runs this suite once more per reduction variant (TPCOMM_CPU_KERNELS, read once per
// process): a variant this CPU cannot run skips, saying so.
std::string variant_unavailable() {
  try {
    transport::cpu::chosen_kernel_isa();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}
#define TPCOMM_SKIP_UNLESS_THE_NAMED_VARIANT_RUNS()                         \
  if (const std::string why = variant_unavailable(); !why.empty()) {        \
    GTEST_SKIP() << why << ": not run here (another machine kind runs it)"; \
  }

TEST(Deterministic, RunsTheReductionVariantTpcommCpuKernelsNames) {
  TPCOMM_SKIP_UNLESS_THE_NAMED_VARIANT_RUNS();
  const char* named = std::getenv("TPCOMM_CPU_KERNELS");
  if (named == nullptr) GTEST_SKIP() << "TPCOMM_CPU_KERNELS unset: the fastest variant runs";
  EXPECT_STREQ(transport::cpu::kernel_isa(), named);
  std::printf("reduction variant: %s\n", transport::cpu::kernel_isa());
}

Make with(std::function<void(CommunicatorOptions&)> set, bool nodes = false) {
  return [set, nodes](std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 60s;
    set(o);
    return nodes ? runtime::create_communicator(std::move(bs), o, test::nodes_in_turn(2))
                 : Communicator::create(std::move(bs), o);
  };
}

TEST(Deterministic, ShmSumsInRankOrderAtEverySizeWithAndWithoutTheMode) {
  TPCOMM_SKIP_UNLESS_THE_NAMED_VARIANT_RUNS();
  for (int w : {2, 3, 4}) {
    for (bool mode : {true, false}) {
      check_properties(w, with([mode](CommunicatorOptions& o) { o.deterministic = mode; }), true,
                       "shm W = " + std::to_string(w) + (mode ? " deterministic" : ""));
    }
  }
}

TEST(Deterministic, ShmWithATeamOfTwoThreadsKeepsTheOrder) {
  TPCOMM_SKIP_UNLESS_THE_NAMED_VARIANT_RUNS();
  const test::TempFile tuning(
      R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu", "world_size": 2, "team_min_bytes": 0,
          "ops": {"all_reduce": [{"max_bytes": null, "use": [{"backend": "shm"}]}]}}]})");
  const test::ScopedEnv file("TPCOMM_TUNING", tuning.path().c_str());
  const test::ScopedEnv spin("TPCOMM_SHM_SPIN_US", "0");
  check_properties(2, with([](CommunicatorOptions& o) {
                     o.deterministic = true;
                     o.threads = 2;
                   }),
                   true, "shm, a team of 2");
}

TEST(Deterministic, GlooGathersAndSumsInRankOrderInTheMode) {
  TPCOMM_SKIP_UNLESS_THE_NAMED_VARIANT_RUNS();
  for (int w : {2, 3, 4}) {
    check_properties(w, with([](CommunicatorOptions& o) {
                       o.deterministic = true;
                       o.disabled = {Backend::kShm};
                     }),
                     true, "gloo W = " + std::to_string(w) + " deterministic");
  }
  // Without the mode: every rank the same bits, in Gloo's own order.
  check_properties(3, with([](CommunicatorOptions& o) { o.disabled = {Backend::kShm}; }), false,
                   "gloo W = 3");
}

TEST(Deterministic, HierGathersAcrossSimulatedNodesInTheMode) {
  TPCOMM_SKIP_UNLESS_THE_NAMED_VARIANT_RUNS();
  // (3 ranks on 2 nodes plan gloo: the gloo test's W = 3.)
  check_properties(4, with([](CommunicatorOptions& o) { o.deterministic = true; }, true), true,
                   "hier deterministic, 4 ranks on 2 nodes");
  check_properties(4, with([](CommunicatorOptions&) {}, true), false, "hier, 4 ranks on 2 nodes");
}

// all_reduce_rmsnorm's new residual: the rank-order sum plus the residual, rounded once, also
// where the norm runs unfused (gloo: its fp32 all-reduce takes the ordered form).
TEST(Deterministic, AllReduceRmsNormsResidualIsTheRankOrderSumOnGlooAndShm) {
  TPCOMM_SKIP_UNLESS_THE_NAMED_VARIANT_RUNS();
  const std::size_t hidden = 1000, rows = 40, n = hidden * rows;  // past gloo's inline room
  for (bool gloo : {true, false}) {
    test::on_ranks(make_thread_group(3), [&](int r, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.timeout = 60s;
      o.deterministic = true;
      if (gloo) o.disabled = {Backend::kShm};
      auto comm = Communicator::create(std::move(bs), o);
      for (DataType t : kTypes) {
        const auto x = order_values(t, r, 0, n);
        const auto residual = order_values(t, 7, 0, n);
        const auto weight = encode(t, std::vector<float>(hidden, 1.0f));
        std::vector<std::uint8_t> out(n * size_of(t)), res_out(n * size_of(t));
        RmsNorm norm{residual.data(), weight.data(), res_out.data(), hidden, 1e-6f};
        comm->all_reduce_rmsnorm(x.data(), out.data(), n, t, norm);
        std::vector<float> want(n);
        for (std::size_t i = 0; i < n; ++i) {
          float acc = order_value(t, 0, i);
          for (int q = 1; q < 3; ++q) acc += order_value(t, q, i);
          want[i] = to_type(t, acc + order_value(t, 7, i));
        }
        EXPECT_EQ(res_out, encode(t, want)) << (gloo ? "gloo " : "shm ") << to_string(t);
      }
    });
  }
}

TEST(Deterministic, TheModeIsInThePlanItsDigestAndItsTextAndRanksMustAgree) {
  std::vector<std::string> digests(2);
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.deterministic = true;
    o.disabled = {Backend::kShm};
    auto comm = Communicator::create(std::move(bs), o);
    EXPECT_TRUE(comm->plan().deterministic);
    digests[static_cast<std::size_t>(r)] = comm->plan().digest;
    const std::string text = plan::plan_text(comm->facts(), comm->plan());
    EXPECT_NE(text.find("mode    eager, deterministic (every reduction sums in rank order 0..W-1; "
                        "on gloo by gathering the inputs and summing here)"),
              std::string::npos)
        << text;
  });
  {
    const test::ScopedEnv env("TPCOMM_DETERMINISTIC", "1");
    test::on_ranks(make_thread_group(2), [&](int, std::shared_ptr<Bootstrap> bs) {
      auto comm = Communicator::create(std::move(bs), CommunicatorOptions{});
      EXPECT_TRUE(comm->plan().deterministic) << "TPCOMM_DETERMINISTIC=1";
    });
  }
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.disabled = {Backend::kShm};
    auto comm = Communicator::create(std::move(bs), o);
    EXPECT_FALSE(comm->plan().deterministic);
    EXPECT_NE(comm->plan().digest, digests[static_cast<std::size_t>(r)]) << "the mode is in it";
  });
  const auto errors = test::errors_on_ranks(make_thread_group(2), [](int r, auto bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    o.deterministic = r == 0;
    Communicator::create(std::move(bs), o);
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("the ranks disagree on the plan"), std::string::npos) << e;
    EXPECT_NE(e.find("TPCOMM_DETERMINISTIC"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace tpcomm
