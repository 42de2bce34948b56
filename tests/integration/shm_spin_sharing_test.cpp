// Whether a shm wait spins depends on every rank on this machine, not only on its node's: the
// simulated nodes of `tpcomm run --nodes` share the cores, and a rank spinning in hier's node
// stage kept its lane's Gloo peer (on another node, the same cores) from running. Measured over
// namespaces (W = 4 on 2 nodes, 2 vCPUs, 4 KiB): the median hier all-reduce went from 1.2-2.6 ms
// to 0.3-0.5 ms, below flat Gloo's 0.55-0.67 ms.
#include <gtest/gtest.h>

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/communicator_state.hpp"
#include "simulated_nodes.hpp"
#include "thread_ranks.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Each node has fewer ranks (2) than this machine has cores, the group more: rank 0 waits
// 400 ms in the node stage for rank 1 with a 10 s spin allowed, and must yield and sleep, not
// spin (a spinner's thread burns about the whole wait).
TEST(ShmSpinSharing, ANodeStageWaiterSleepsWhenTheGroupOutnumbersTheCores) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 2) GTEST_SKIP() << "needs 2 cores or more (a node of 2 ranks with a core each)";
  const int size = 2 * static_cast<int>(cores / 2 + 1);  // more ranks than cores
  const test::ScopedEnv spin("TPCOMM_SHM_SPIN_US", "10000000");
  const auto group = make_thread_group(size);
  std::vector<double> waiter_cpu_ms(1, -1);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = runtime::create_communicator(bs, o, test::consecutive_nodes_of(2));
    ASSERT_EQ(comm->plan().ops.at(Op::kAllReduce).table.at(0).backend, Backend::kHier);
    std::vector<float> data(1024, static_cast<float>(r + 1));
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    bs->barrier("test: before the late call", Deadline::after(20s));
    if (r == 1) std::this_thread::sleep_for(400ms);
    const double before = thread_cpu_ms();
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    if (r == 0) waiter_cpu_ms[0] = thread_cpu_ms() - before;
    const float sum = static_cast<float>(size * (size + 1) / 2);
    EXPECT_EQ(data[0], sum * static_cast<float>(size)) << "rank " << r;
    EXPECT_EQ(data[1023], sum * static_cast<float>(size)) << "rank " << r;
  });
  EXPECT_GE(waiter_cpu_ms[0], 0.0);
  EXPECT_LT(waiter_cpu_ms[0], 150.0)
      << "rank 0 burnt " << waiter_cpu_ms[0] << " ms of CPU in a 400 ms wait: it spun while "
      << size << " ranks share " << cores << " cores";
}

}  // namespace
}  // namespace tpcomm
