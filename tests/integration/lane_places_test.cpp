// One-shot all-reduces of one step move through their lane (ShmBackend::step_offset): long runs of
// calls whose sizes change from call to call, so every rank's places wrap and each size lands
// where another size was, every element checked against sums computed here; in and out of place,
// W = 2 and 3, float32 and int64 (exact), sizes from a few elements to more than half a lane.
#include <gtest/gtest.h>

#include <cstdint>
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

}  // namespace
}  // namespace tpcomm
