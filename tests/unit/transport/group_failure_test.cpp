// The GPU kernels' failure handling that the host can check without a GPU: where the group's
// failure word lives in each workspace, how its value names the first cause, what the host says
// about each kind of failure record, and the kernels' own wait budget.
#include <gtest/gtest.h>

#include <chrono>

#include "kernels/cuda/multimem_layout.hpp"
#include "tpcomm/env.hpp"
#include "transport/cuda/kernel_failure_text.hpp"
#include "transport/cuda/kernel_names.hpp"

namespace tpcomm::transport::cuda {
namespace {

using std::chrono::milliseconds;

TEST(GroupFailureWord, LiesAlignedBetweenTheStepsAndTheDataOfEveryWorkspace) {
  for (std::size_t granularity : {0u, 2u << 20}) {
    const WorkspaceLayout l = workspace_layout(16u << 20, granularity);
    EXPECT_GE(l.failed_offset, l.steps_offset + sizeof(std::uint64_t) * kMaxBlocks);
    EXPECT_LE(l.failed_offset + sizeof(std::uint64_t), l.data_offset);
    EXPECT_EQ(l.failed_offset % 8, 0u);
    // The kernels find it with workspace_layout(0, 0): the same offset whatever the data size.
    EXPECT_EQ(l.failed_offset, workspace_layout(0, 0).failed_offset);
    const MultimemLayout m = multimem_layout(8u << 20, granularity);
    EXPECT_GE(m.failed_offset, m.probe_offset + kVecBytes);
    EXPECT_LE(m.failed_offset + sizeof(std::uint64_t), m.data_offset);
    EXPECT_EQ(m.failed_offset % 8, 0u);
  }
}

TEST(GroupFailureWord, EveryCauseAndOriginRankRoundTripsAndIsNeverZero) {
  for (int cause : {1, 2}) {
    for (int rank = 0; rank < kMaxRanks; ++rank) {
      const std::uint64_t v = group_failure_value(cause, rank);
      EXPECT_NE(v, 0u) << cause << " " << rank;
      EXPECT_EQ(group_failure_origin(v), rank);
      EXPECT_EQ(group_failure_cause(v), cause);
    }
  }
}

KernelFailure record(int code, int rank, int peer, int phase, std::uint64_t step) {
  KernelFailure f{};
  f.code = code;
  f.rank = rank;
  f.peer = peer;
  f.phase = phase;
  f.step = step;
  return f;
}

TEST(KernelFailureText, NamesTheCauseTheRanksTheStepAndTheBudget) {
  const milliseconds budget(600000);
  EXPECT_EQ(kernel_failure_text(record(1, 0, 1, 0, 7), "custom kernel", budget),
            "custom kernel on rank 0: rank 1 did not signal step 7 (start barrier) within 600000 "
            "ms (the kernels' wait budget, TPCOMM_KERNEL_TIMEOUT_MS)");
  EXPECT_EQ(kernel_failure_text(record(1, 2, -1, 1, 9), "multimem kernel", budget),
            "multimem kernel on rank 2: not every rank signalled step 9 (middle barrier) within "
            "600000 ms (the kernels' wait budget, TPCOMM_KERNEL_TIMEOUT_MS)");
  EXPECT_EQ(kernel_failure_text(record(2, 3, 0, 0, 4), "custom kernel", budget),
            "custom kernel on rank 3 stopped at step 4: the group was aborted");
  EXPECT_EQ(kernel_failure_text(record(3, 1, 2, -1, 12), "custom kernel", budget),
            "custom kernel on rank 1 stopped at step 12: the group failed earlier (rank 2 gave up "
            "or aborted; every later launch on every rank fails, CUDA graph replays by trapping)");
  EXPECT_NE(kernel_failure_text(record(3, 1, -1, -1, 5), "custom kernel", budget)
                .find("(another rank gave up"),
            std::string::npos);
}

TEST(KernelWaitBudget, IsTheKernelTimeoutWhenSetElseTheCommunicators) {
  EXPECT_EQ(kernel_wait_budget(milliseconds(2000), milliseconds(0)), milliseconds(2000));
  EXPECT_EQ(kernel_wait_budget(milliseconds(2000), milliseconds(600000)), milliseconds(600000));
  // The communicator's default: ten minutes, longer than the host's sixty seconds.
  const EnvVar* v = nullptr;
  for (const EnvVar& e : env_registry()) {
    if (e.name == "TPCOMM_KERNEL_TIMEOUT_MS") v = &e;
  }
  ASSERT_NE(v, nullptr) << "TPCOMM_KERNEL_TIMEOUT_MS is not in the environment registry";
  EXPECT_EQ(v->default_value, "600000");
}

}  // namespace
}  // namespace tpcomm::transport::cuda
