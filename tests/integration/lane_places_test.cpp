// One-shot all-reduces of one step move through their lane (ShmBackend::step_offset): long runs of
// calls whose sizes change from call to call, so every rank's places wrap and each size lands
// where another size was, every element checked against sums computed here; in and out of place,
// W = 2 and 3, float32 and int64 (exact), sizes from a few elements to more than half a lane.
// At W = 2 the ranks' slots take turns from step to step (step_slot): ops of every kind, one and
// several steps long, with one rank running late by turns, must still find every element.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

// Different for every rank, call and element; small, so sums are exact in float32.
std::int64_t value(int rank, int call, std::size_t i) {
  return static_cast<std::int64_t>(
             (static_cast<std::size_t>(rank) * 7 + i * 3 + static_cast<std::size_t>(call) * 5) %
             61) -
         30;
}

TEST(LanePlaces, OneStepCallsOfChangingSizesWrapThroughTheLaneWithEveryElementRight) {
  // Elements of 8 bytes: 1 KiB, 12 KiB (three pages: places of a size that does not divide the
  // lane), 300 KiB (one place in a 512 KiB lane) and 40 B.
  const std::size_t sizes[] = {128, 1536, 38400, 5, 512};
  for (int w : {2, 3}) {
    test::on_ranks(make_thread_group(w), [&](int r, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.timeout = 30s;
      auto comm = Communicator::create(bs, o);
      ASSERT_EQ(comm->route(Op::kAllReduce, 300 << 10, DataType::kFloat32, Mode::kEager).backend,
                Backend::kShm);
      int wrong = 0;
      for (int call = 0; call < 400; ++call) {
        const std::size_t n = sizes[static_cast<std::size_t>(call) % 5];
        const bool in_place = call % 3 == 0;
        std::vector<float> f(n), out(n, -1.0f);
        std::vector<std::int64_t> q(n), qout(n, -1);
        for (std::size_t i = 0; i < n; ++i) {
          q[i] = value(r, call, i);
          f[i] = static_cast<float>(q[i]);
        }
        comm->all_reduce(f.data(), in_place ? f.data() : out.data(), n, DataType::kFloat32,
                         ReduceOp::kSum);
        comm->all_reduce(q.data(), in_place ? q.data() : qout.data(), n, DataType::kInt64,
                         ReduceOp::kSum);
        const float* got = in_place ? f.data() : out.data();
        const std::int64_t* qgot = in_place ? q.data() : qout.data();
        for (std::size_t i = 0; i < n; ++i) {
          std::int64_t want = 0;
          for (int p = 0; p < w; ++p) want += value(p, call, i);
          if (got[i] != static_cast<float>(want) || qgot[i] != want) ++wrong;
        }
      }
      EXPECT_EQ(wrong, 0) << "rank " << r << " of " << w;
    });
  }
}

// All-reduces of up to 64 KiB one-shot, larger ones two-shot (several steps), all-gathers and
// reduce-scatters through the lanes: each op reads and writes its lanes in its own way.
class MixedTuning : public test::TempFile {
 public:
  MixedTuning()
      : TempFile(R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu", "world_size": 2, "ops": {
      "all_reduce": [{"max_bytes": 65536, "use": [{"backend": "shm", "algorithm": "one_shot"}]},
                     {"max_bytes": null, "use": [{"backend": "shm", "algorithm": "two_shot"}]}],
      "all_gather": [{"max_bytes": null, "use": [{"backend": "shm", "algorithm": "one_shot"}]}],
      "reduce_scatter": [{"max_bytes": null, "use": [{"backend": "shm"}]}]}}]})") {}
};

// Busy for `us` microseconds: the peer runs ahead into the next step meanwhile.
void run_late(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(LanePlaces, AtTwoRanksOpsOfEveryKindTakeTurnsInTheSlotsWithEveryElementRight) {
  const MixedTuning tuning;
  const test::ScopedEnv env("TPCOMM_TUNING", tuning.path().c_str());
  // Element counts: one step, a step and a half, three steps (512 KiB steps), a few elements.
  const std::size_t counts[] = {3000, 200'000, 393'216, 7, 16'384};
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 30s;
    auto comm = Communicator::create(bs, o);
    ASSERT_EQ(comm->route(Op::kAllReduce, 1 << 20, DataType::kFloat32, Mode::kEager).algorithm,
              Algorithm::kTwoShot);
    int wrong = 0;
    for (int call = 0; call < 120; ++call) {
      const std::size_t n = counts[static_cast<std::size_t>(call) % 5];
      if (call % 7 == r * 3) run_late(40);  // each rank late by turns
      std::vector<float> in(2 * n), out(2 * n, -1.0f);
      for (std::size_t i = 0; i < 2 * n; ++i) in[i] = static_cast<float>(value(r, call, i));
      auto want = [&](std::size_t i) {
        return static_cast<float>(value(0, call, i) + value(1, call, i));
      };
      switch (call % 3) {
        case 0:
          comm->all_reduce(in.data(), out.data(), 2 * n, DataType::kFloat32, ReduceOp::kSum);
          for (std::size_t i = 0; i < 2 * n; ++i) wrong += out[i] != want(i);
          break;
        case 1:
          comm->all_gather(in.data(), out.data(), n, DataType::kFloat32);
          for (std::size_t i = 0; i < 2 * n; ++i) {
            wrong += out[i] != static_cast<float>(value(static_cast<int>(i / n), call, i % n));
          }
          break;
        default:
          comm->reduce_scatter(in.data(), out.data(), n, DataType::kFloat32, ReduceOp::kSum);
          for (std::size_t i = 0; i < n; ++i)
            wrong += out[i] != want(static_cast<std::size_t>(r) * n + i);
      }
    }
    EXPECT_EQ(wrong, 0) << "rank " << r;
  });
}

}  // namespace
}  // namespace tpcomm
