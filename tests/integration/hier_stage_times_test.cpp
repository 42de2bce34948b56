// Communicator::stage_times: where a hier call's time went on each rank, stage by stage, with
// the waits for peers in the stage that waited. Two simulated nodes of threads: ranks 0-1 on
// node 0, 2-3 on node 1; rank 1 comes 300 ms late.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/communicator_state.hpp"
#include "simulated_nodes.hpp"
#include "thread_ranks.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

long long ms(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

// Rank 0 waits for rank 1 inside the node; rank 2, its lane peer on the other node, waits for
// rank 0 between the nodes; rank 3 waits for rank 2 inside its node after rank 2's lane.
TEST(HierStageTimes, EachRanksWaitIsCountedInTheStageThatWaited) {
  const auto group = make_thread_group(4);
  std::vector<std::vector<StageTime>> spent(4);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = runtime::create_communicator(bs, o, test::consecutive_nodes_of(2));
    std::vector<float> data(4096, static_cast<float>(r + 1));
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    const auto before = comm->stage_times();
    bs->barrier("test: before the late call", Deadline::after(20s));
    if (r == 1) std::this_thread::sleep_for(300ms);
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(data[4095], 40.0f) << "rank " << r;  // (1 + 2 + 3 + 4) * 4
    auto after = comm->stage_times();
    ASSERT_EQ(after.size(), before.size());
    for (std::size_t i = 0; i < after.size(); ++i) after[i].total -= before[i].total;
    spent[static_cast<std::size_t>(r)] = after;
  });
  for (const auto& s : spent) {
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].name, "hier intra-node (shm)");
    EXPECT_EQ(s[1].name, "hier inter-node (gloo)");
  }
  EXPECT_GE(ms(spent[0][0].total), 250) << "rank 0 waited for rank 1 inside the node";
  EXPECT_LT(ms(spent[0][1].total), 150) << "rank 0's lane peer was waiting already";
  EXPECT_GE(ms(spent[2][1].total), 250) << "rank 2 waited for rank 0 between the nodes";
  EXPECT_LT(ms(spent[2][0].total), 150) << "rank 2's node peer came on time";
  EXPECT_LT(ms(spent[1][0].total + spent[1][1].total), 150) << "everyone waited for rank 1";
}

// A group on one node stages nothing: shm runs the calls whole.
TEST(HierStageTimes, AnUnstagedPlanReportsNoStages) {
  const auto group = make_thread_group(2);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    std::vector<float> data(64, static_cast<float>(r));
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_TRUE(comm->stage_times().empty()) << "rank " << r;
  });
}

}  // namespace
}  // namespace tpcomm
