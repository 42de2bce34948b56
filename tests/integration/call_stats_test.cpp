// Communicator::stats(): every completed call counted once, under the collective the caller made
// and the route that carried it, with its bytes; broadcast and barrier as themselves; a failed
// call not at all; reset_stats() starts from zero. Two ranks on threads, one node (shm).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/communicator_state.hpp"
#include "thread_ranks.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

// (collective, "backend/algorithm") -> (calls, bytes)
using Counted =
    std::map<std::tuple<std::string, std::string>, std::tuple<std::uint64_t, std::uint64_t>>;

Counted counted(const std::vector<RouteStats>& rows) {
  Counted out;
  for (const auto& r : rows) {
    const std::string route =
        r.backend ? std::string(to_string(*r.backend)) + "/" + std::string(to_string(*r.algorithm))
                  : "store";
    out[{std::string(to_string(r.collective)), route}] = {r.calls, r.bytes};
  }
  return out;
}

// The route the agreed plan gives `op` at `bytes` (the reference, read from the plan, not from
// the counters).
std::string route_of(const Communicator& comm, Op op, std::uint64_t bytes) {
  const TableRow row = comm.plan().ops.at(op).row_for(bytes);
  return std::string(to_string(row.backend)) + "/" + std::string(to_string(row.algorithm));
}

TEST(CallStats, EveryCompletedCallIsCountedUnderItsCollectiveAndRoute) {
  const auto group = make_thread_group(2);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = Communicator::create(bs, o);
    EXPECT_TRUE(comm->stats().empty()) << "a new communicator has carried nothing";
    std::vector<float> small(1024, static_cast<float>(r + 1));  // 4 KiB
    for (int i = 0; i < 3; ++i) {
      comm->all_reduce(small.data(), small.data(), small.size(), DataType::kFloat32,
                       ReduceOp::kSum);
    }
    std::vector<float> big(1 << 20, 1.0f);  // 4 MiB: another row of the table
    comm->all_reduce(big.data(), big.data(), big.size(), DataType::kFloat32, ReduceOp::kSum);
    std::vector<std::int32_t> part(100, r), gathered(200);
    comm->all_gather(part.data(), gathered.data(), part.size(), DataType::kInt32);
    std::vector<std::int32_t> whole(200, r), mine(100);
    comm->reduce_scatter(whole.data(), mine.data(), mine.size(), DataType::kInt32, ReduceOp::kSum);
    // 3 MiB: three all_gather chunks inside, one broadcast outside.
    std::vector<std::uint8_t> bytes(3 << 20, static_cast<std::uint8_t>(r == 1 ? 7 : 0));
    comm->broadcast(bytes.data(), bytes.size(), DataType::kUInt8, 1);
    EXPECT_EQ(bytes[(3 << 20) - 1], 7);
    comm->barrier();

    const Counted got = counted(comm->stats());
    Counted want;
    const std::string ar_small = route_of(*comm, Op::kAllReduce, 4096);
    const std::string ar_big = route_of(*comm, Op::kAllReduce, 4 << 20);
    if (ar_small == ar_big) {
      want[{"all_reduce", ar_small}] = {4, 3 * 4096 + (4 << 20)};
    } else {
      want[{"all_reduce", ar_small}] = {3, 3 * 4096};
      want[{"all_reduce", ar_big}] = {1, 4 << 20};
    }
    want[{"all_gather", route_of(*comm, Op::kAllGather, 800)}] = {1, 800};
    want[{"reduce_scatter", route_of(*comm, Op::kReduceScatter, 800)}] = {1, 800};
    want[{"broadcast", route_of(*comm, Op::kAllGather, 2 << 20)}] = {1, 3 << 20};
    want[{"barrier", route_of(*comm, Op::kAllReduce, 8)}] = {1, 4};
    EXPECT_EQ(got, want) << "rank " << r;

    comm->reset_stats();
    EXPECT_TRUE(comm->stats().empty()) << "rank " << r;
    comm->all_reduce(small.data(), small.data(), small.size(), DataType::kFloat32, ReduceOp::kSum);
    const Counted after = counted(comm->stats());
    EXPECT_EQ(after, (Counted{{{"all_reduce", ar_small}, {1, 4096}}})) << "rank " << r;
  });
}

TEST(CallStats, ARefusedCallIsNotCounted) {
  const auto group = make_thread_group(2);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = Communicator::create(bs, o);
    std::vector<std::int32_t> v(16, r);
    EXPECT_THROW(comm->all_reduce(v.data(), v.data(), v.size(), DataType::kInt32, ReduceOp::kAvg),
                 Error);
    EXPECT_TRUE(comm->stats().empty()) << "rank " << r;
  });
}

}  // namespace
}  // namespace tpcomm
