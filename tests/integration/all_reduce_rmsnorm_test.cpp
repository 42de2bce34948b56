// all_reduce_rmsnorm on every CPU route: shm's fused one-shot (W = 2, 3 and 4, and a team of two
// threads), gloo and hier (4 ranks on two simulated nodes) unfused. float32, bfloat16 and
// float16; rows of 64 to 16384 elements, row lengths that are no multiple of a vector, 1 to 4096
// rows, calls of several lane steps; out of place, in place, without a residual (and with the
// sum written out). Checked
// against a float64 reference computed here from the rounded inputs (residual_out within 2e-5 of
// the inputs' magnitude for float32 and 2 units in the last place for 16-bit types; the output
// likewise), and every rank's bits against rank 0's. Bad calls are refused on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/communicator_state.hpp"
#include "simulated_nodes.hpp"
#include "support/typed_values.hpp"
#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

struct Shape {
  std::size_t rows, hidden;
};
// 100 and 1001: no multiple of 8 or 16 elements; 4096 x 64 and 40 x 8192: several lane steps.
constexpr Shape kShapes[] = {{1, 64},    {7, 100},   {3, 1001}, {2, 4096},
                             {1, 16384}, {4096, 64}, {40, 8192}};
constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16};
// kSumOut: no residual, and residual_out receives the rounded sum.
enum class Form { kOutOfPlace, kInPlace, kNoResidual, kSumOut };
constexpr std::size_t kForms = 4;
constexpr float kEps = 1e-5f;

using test::load;
using test::rounded;

using test::norm_value;
using test::norm_values;

// One rank's results of a call.
struct Result {
  std::vector<std::uint8_t> out, residual_out;
};

using test::norm_tolerance;

void check_against_reference(DataType t, Shape s, Form form, int world,
                             const std::vector<Result>& results) {
  const Result& got = results[0];
  for (std::size_t row = 0; row < s.rows; ++row) {
    std::vector<double> res(s.hidden), scale(s.hidden);
    double squares = 0;
    for (std::size_t j = 0; j < s.hidden; ++j) {
      const std::size_t i = row * s.hidden + j;
      const bool residual = form == Form::kOutOfPlace || form == Form::kInPlace;
      double sum = residual ? norm_value(t, -1, i) : 0.0;
      scale[j] = std::fabs(sum);
      for (int r = 0; r < world; ++r) {
        sum += norm_value(t, r, i);
        scale[j] += std::fabs(norm_value(t, r, i));
      }
      res[j] = sum;
      const double kept = rounded(t, static_cast<float>(sum));
      squares += kept * kept;
    }
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(s.hidden) + kEps);
    for (std::size_t j = 0; j < s.hidden; ++j) {
      const std::size_t i = row * s.hidden + j;
      const double w = norm_value(t, -2, j);
      if (form != Form::kNoResidual) {
        const double r_got = load(t, got.residual_out, i);
        ASSERT_LE(std::fabs(r_got - res[j]), norm_tolerance(t, res[j], scale[j]))
            << "residual_out row " << row << " element " << j << ": " << r_got << " against "
            << res[j];
      }
      const double ref = rounded(t, static_cast<float>(res[j])) * inv * w;
      const double o_got = load(t, got.out, i);
      ASSERT_LE(std::fabs(o_got - ref), norm_tolerance(t, ref, scale[j] * inv * w))
          << "out row " << row << " element " << j << ": " << o_got << " against " << ref;
    }
  }
  for (std::size_t r = 1; r < results.size(); ++r) {
    ASSERT_EQ(results[r].out, got.out) << "rank " << r << "'s output differs from rank 0's";
    ASSERT_EQ(results[r].residual_out, got.residual_out) << "rank " << r << "'s residual_out";
  }
}

// One call of rank r in `form`; its results.
Result call(Communicator& comm, DataType t, Shape s, Form form) {
  const std::size_t n = s.rows * s.hidden;
  const int r = comm.rank();
  std::vector<std::uint8_t> input = norm_values(t, r, n);
  std::vector<std::uint8_t> residual = norm_values(t, -1, n);
  const std::vector<std::uint8_t> weight = norm_values(t, -2, s.hidden);
  Result res;
  RmsNorm norm;
  norm.weight = weight.data();
  norm.hidden = s.hidden;
  norm.eps = kEps;
  if (form == Form::kInPlace) {
    norm.residual = residual.data();
    norm.residual_out = residual.data();
    comm.all_reduce_rmsnorm(input.data(), input.data(), n, t, norm);
    res.out = std::move(input);
    res.residual_out = std::move(residual);
    return res;
  }
  res.out.assign(n * size_of(t), 0xee);
  if (form != Form::kNoResidual) {
    res.residual_out.assign(n * size_of(t), 0xee);
    norm.residual_out = res.residual_out.data();
  }
  if (form == Form::kOutOfPlace) norm.residual = residual.data();
  comm.all_reduce_rmsnorm(input.data(), res.out.data(), n, t, norm);
  return res;
}

// Every shape in every type, the forms taking turns so that each type meets each form.
void check_every_shape(
    const std::vector<std::shared_ptr<Bootstrap>>& group,
    const std::function<std::unique_ptr<Communicator>(std::shared_ptr<Bootstrap>)>& make,
    Backend expected) {
  const auto w = static_cast<int>(group.size());
  std::vector<std::vector<Result>> results(std::size(kTypes) * std::size(kShapes),
                                           std::vector<Result>(group.size()));
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = make(std::move(bs));
    ASSERT_EQ(comm->plan().ops.at(Op::kAllReduceRmsNorm).table.front().backend, expected);
    std::size_t k = 0;
    for (std::size_t ti = 0; ti < std::size(kTypes); ++ti) {
      for (std::size_t si = 0; si < std::size(kShapes); ++si, ++k) {
        const auto form = static_cast<Form>((ti + si) % kForms);
        results[k][static_cast<std::size_t>(r)] = call(*comm, kTypes[ti], kShapes[si], form);
      }
    }
    for (const auto& st : comm->stats()) {
      if (st.collective == Collective::kAllReduceRmsNorm) {
        EXPECT_EQ(st.backend, expected);
      }
    }
  });
  std::size_t k = 0;
  for (std::size_t ti = 0; ti < std::size(kTypes); ++ti) {
    for (std::size_t si = 0; si < std::size(kShapes); ++si, ++k) {
      const auto form = static_cast<Form>((ti + si) % kForms);
      SCOPED_TRACE(std::string(to_string(kTypes[ti])) + " " + std::to_string(kShapes[si].rows) +
                   " x " + std::to_string(kShapes[si].hidden) + " form " +
                   std::to_string(static_cast<int>(form)) + " W = " + std::to_string(w));
      check_against_reference(kTypes[ti], kShapes[si], form, w, results[k]);
    }
  }
}

std::unique_ptr<Communicator> plain(std::shared_ptr<Bootstrap> bs) {
  CommunicatorOptions o;
  o.timeout = 60s;
  return Communicator::create(std::move(bs), o);
}

TEST(AllReduceRmsNorm, ShmFusesItAtTwoThreeAndFourRanks) {
  for (int w : {2, 3, 4}) check_every_shape(make_thread_group(w), plain, Backend::kShm);
}

TEST(AllReduceRmsNorm, ShmWithATeamOfTwoThreadsGivesTheSameRows) {
  // Teams from 0 bytes; ranks and teams outnumber the cores, so no spinning.
  const test::TempFile tuning(
      R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu", "world_size": 2, "team_min_bytes": 0,
          "ops": {"all_reduce_rmsnorm": [{"max_bytes": null, "use": [{"backend": "shm"}]}]}}]})");
  const test::ScopedEnv file("TPCOMM_TUNING", tuning.path().c_str());
  const test::ScopedEnv spin("TPCOMM_SHM_SPIN_US", "0");
  check_every_shape(
      make_thread_group(2),
      [](std::shared_ptr<Bootstrap> bs) {
        CommunicatorOptions o;
        o.timeout = 60s;
        o.threads = 2;
        return Communicator::create(std::move(bs), o);
      },
      Backend::kShm);
}

TEST(AllReduceRmsNorm, GlooCarriesItUnfused) {
  for (int w : {2, 3}) {
    check_every_shape(
        make_thread_group(w),
        [](std::shared_ptr<Bootstrap> bs) {
          CommunicatorOptions o;
          o.timeout = 60s;
          o.disabled = {Backend::kShm};
          return Communicator::create(std::move(bs), o);
        },
        Backend::kGloo);
  }
}

TEST(AllReduceRmsNorm, HierCarriesItUnfusedAcrossSimulatedNodes) {
  check_every_shape(
      make_thread_group(4),
      [](std::shared_ptr<Bootstrap> bs) {
        CommunicatorOptions o;
        o.timeout = 60s;
        return runtime::create_communicator(std::move(bs), o, test::nodes_in_turn(2));
      },
      Backend::kHier);
}

// Every rank's error of `bad` on a group of 3 over `route` ("shm", "gloo" with shm disabled) or 4
// on two simulated nodes ("hier"): all fail, rank 1's error (or with `everywhere` every rank's)
// says `expected`.
void expect_refused_everywhere(const std::string& route, const std::string& expected,
                               const std::function<void(Communicator&, int)>& bad,
                               bool everywhere = false) {
  const bool hier = route == "hier";
  const auto errors = test::errors_on_ranks(make_thread_group(hier ? 4 : 3), [&](int r, auto bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    if (route == "gloo") o.disabled = {Backend::kShm};
    auto comm = hier ? runtime::create_communicator(bs, o, test::nodes_in_turn(2))
                     : Communicator::create(bs, o);
    bad(*comm, r);
    comm->barrier();  // a rank whose own call was fine learns of a peer's refusal here at last
  });
  for (std::size_t r = 0; r < errors.size(); ++r) {
    EXPECT_FALSE(errors[r].empty()) << route << " rank " << r << " did not fail";
    if (r == 1 || everywhere) {
      EXPECT_NE(errors[r].find(expected), std::string::npos)
          << route << " rank " << r << ": " << errors[r];
    }
  }
}

// A call of 2 rows of 64 float32 elements, changed by `tweak` on rank 1 (or every rank).
void norm_call(Communicator& c, int r, bool every_rank,
               const std::function<void(RmsNorm&, std::vector<float>&, std::size_t&, DataType&,
                                        void*&)>& tweak) {
  std::vector<float> in(256, 1.0f), residual(256, 0.5f), weight(64, 1.0f), out(256), res_out(256);
  RmsNorm norm;
  norm.weight = weight.data();
  norm.hidden = 64;
  norm.residual = residual.data();
  norm.residual_out = res_out.data();
  std::size_t count = 128;
  DataType type = DataType::kFloat32;
  void* output = out.data();
  if (every_rank || r == 1) tweak(norm, in, count, type, output);
  c.all_reduce_rmsnorm(in.data(), output, count, type, norm);
}

// The mismatch names both sides on every rank (rank 1's own call among them).
TEST(AllReduceRmsNorm, RowsOrEpsThatDifferAcrossRanksFailOnEveryRank) {
  for (const char* route : {"shm", "gloo", "hier"}) {
    expect_refused_everywhere(
        route, "all_reduce_rmsnorm(float32 x 128, rows of 32, residual, eps 1e-06)",
        [](Communicator& c, int r) {
          norm_call(c, r, false, [](RmsNorm& n, auto&, auto&, auto&, auto&) { n.hidden = 32; });
        },
        true);
  }
  expect_refused_everywhere(
      "shm", "rows of 64, residual, eps 0.001",
      [](Communicator& c, int r) {
        norm_call(c, r, false, [](RmsNorm& n, auto&, auto&, auto&, auto&) { n.eps = 1e-3f; });
      },
      true);
  expect_refused_everywhere(
      "gloo", "all_reduce_rmsnorm(float32 x 128, rows of 64, eps 1e-06)",
      [](Communicator& c, int r) {
        norm_call(c, r, false, [](RmsNorm& n, auto&, auto&, auto&, auto&) {
          n.residual = nullptr;
          n.residual_out = nullptr;
        });
      },
      true);
}

TEST(AllReduceRmsNorm, BadCallsAreRefusedOnTheCallingRankAndEveryRankFails) {
  using Tweak = std::function<void(RmsNorm&, std::vector<float>&, std::size_t&, DataType&, void*&)>;
  const std::vector<std::pair<std::string, Tweak>> cases = {
      {"are not whole rows of 64", [](RmsNorm&, auto&, std::size_t& n, auto&, auto&) { n = 100; }},
      {"int32 is not a floating-point type",
       [](RmsNorm&, auto&, auto&, DataType& t, auto&) { t = DataType::kInt32; }},
      {"the row length (hidden) must be",
       [](RmsNorm& m, auto&, auto&, auto&, auto&) { m.hidden = 0; }},
      {"a residual without a residual_out",
       [](RmsNorm& m, auto&, auto&, auto&, auto&) { m.residual_out = nullptr; }},
      {"no weight", [](RmsNorm& m, auto&, auto&, auto&, auto&) { m.weight = nullptr; }},
      {"the output [",
       [](RmsNorm& m, auto&, auto&, auto&, void*& out) {
         m.residual_out = static_cast<float*>(out) + 64;  // the outputs overlap by a row
       }},
      {"the input [",
       [](RmsNorm& m, std::vector<float>& in, auto&, auto&, auto&) {
         m.residual_out = in.data();  // the new residual over the input its peers read
       }},
  };
  for (const auto& [expected, tweak] : cases) {
    expect_refused_everywhere(
        "shm", expected, [&, tw = tweak](Communicator& c, int r) { norm_call(c, r, false, tw); });
  }
}

}  // namespace
}  // namespace tpcomm
