// What a captured custom all-reduce runs while its input is not registered (docs/gpu-graphs.md,
// "Copying replays take the eager table's algorithm"): the eager table's choice for copied inputs,
// never the graph table's, which assumes registration.
#include <gtest/gtest.h>

#include "runtime/graph_copy_algorithm.hpp"
#include "support/test_support.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm {
namespace {

constexpr std::uint64_t KiB = 1024;

TableRow row(Backend b, Algorithm a) {
  TableRow r;
  r.backend = b;
  r.algorithm = a;
  return r;
}

TEST(UnregisteredReplay, TakesTheEagerTablesCustomAlgorithm) {
  EXPECT_EQ(runtime::unregistered_replay_algorithm(row(Backend::kCustom, Algorithm::kOneShot),
                                                   row(Backend::kCustom, Algorithm::kTwoShot)),
            Algorithm::kTwoShot);
  EXPECT_EQ(runtime::unregistered_replay_algorithm(row(Backend::kCustom, Algorithm::kTwoShot),
                                                   row(Backend::kCustom, Algorithm::kOneShot)),
            Algorithm::kOneShot);
}

TEST(UnregisteredReplay, TwoShotWhereTheEagerTableLeavesCustom) {
  for (Backend other : {Backend::kNccl, Backend::kMultimem}) {
    EXPECT_EQ(runtime::unregistered_replay_algorithm(row(Backend::kCustom, Algorithm::kOneShot),
                                                     row(other, Algorithm::kNccl)),
              Algorithm::kTwoShot)
        << to_string(other);
  }
}

TEST(UnregisteredReplay, OtherBackendsKeepTheirAlgorithm) {
  EXPECT_EQ(runtime::unregistered_replay_algorithm(row(Backend::kNccl, Algorithm::kNccl),
                                                   row(Backend::kCustom, Algorithm::kOneShot)),
            Algorithm::kNccl);
}

// On the shipped 8 x H100 topology the graph table gives 256-512 KiB to custom one-shot (the
// eager table: multimem): a replay of such a call that copies runs two-shot; below 256 KiB it
// runs what the eager table runs there.
TEST(UnregisteredReplay, OnTheH100TablesACopyingReplayNeverUsesTheGraphOnlyRange) {
  PlanOptions eager_options, graph_options;
  graph_options.mode = Mode::kGraph;
  const auto facts = test::load_facts("topologies/h100x8_single.json");
  const OpPlan eager = make_plan(facts, eager_options).ops.at(Op::kAllReduce);
  const OpPlan graph = make_plan(facts, graph_options).ops.at(Op::kAllReduce);
  const TableRow g384 = graph.row_for(384 * KiB);
  ASSERT_EQ(g384.backend, Backend::kCustom);
  ASSERT_NE(eager.row_for(384 * KiB).backend, Backend::kCustom);
  EXPECT_EQ(runtime::unregistered_replay_algorithm(g384, eager.row_for(384 * KiB)),
            Algorithm::kTwoShot);
  const TableRow e64 = eager.row_for(64 * KiB);
  ASSERT_EQ(e64.backend, Backend::kCustom);
  EXPECT_EQ(runtime::unregistered_replay_algorithm(graph.row_for(64 * KiB), e64), e64.algorithm);
}

}  // namespace
}  // namespace tpcomm
