// Each rank's shm slot on the rank's NUMA node (transport/cpu/numa_placement): ranks bound to a CPU
// each (as tpcomm run --bind-to core binds them) say in the debug log that their slot was bound to
// the node sysfs gives for their CPU, and that every page of it is there once populated. On a
// machine of one node that node is 0 for everyone; the test says so.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/log.hpp"
#include "transport/shm/shm_options.hpp"

namespace tpcomm {
namespace {

int sysfs_node_of(int cpu) {
  DIR* d = opendir(("/sys/devices/system/cpu/cpu" + std::to_string(cpu)).c_str());
  int node = 0;
  if (d == nullptr) return node;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9') {
      node = std::atoi(e->d_name + 4);
    }
  }
  closedir(d);
  return node;
}

TEST(SlotPlacement, EachRanksSlotIsBoundToTheNodeOfItsCpu) {
  cpu_set_t usable;
  ASSERT_EQ(sched_getaffinity(0, sizeof(usable), &usable), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &usable)) cpus.push_back(c);
  }
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs (a rank bound to each)";
  std::mutex m;
  std::vector<std::string> lines;
  set_log_level(LogLevel::kDebug);
  set_log_sink([&](LogLevel, std::string_view subsystem, std::string_view message) {
    if (subsystem != "shm" || message.find("slot") == std::string_view::npos) return;
    std::lock_guard<std::mutex> lock(m);
    lines.emplace_back(message);
  });
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<std::size_t>(r)], &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    auto comm = Communicator::create(bs);
    std::vector<float> data(1024, static_cast<float>(r + 1));
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(data[1023], 3.0f);
  });
  set_log_sink(nullptr);
  set_log_level(LogLevel::kWarn);
  for (int r = 0; r < 2; ++r) {
    const int node = sysfs_node_of(cpus[static_cast<std::size_t>(r)]);
    std::printf("rank %d on cpu %d: sysfs node %d\n", r, cpus[static_cast<std::size_t>(r)], node);
    const std::string bound =
        "rank " + std::to_string(r) + ": slot bound to node " + std::to_string(node);
    const std::string pages = "rank " + std::to_string(r) + ": slot pages: " +
                              std::to_string(transport::shm::ShmOptions{}.workspace_bytes / 4096) +
                              " on node " + std::to_string(node) + " ";
    bool saw_bound = false, saw_pages = false;
    for (const auto& l : lines) {
      saw_bound = saw_bound || l == bound;
      saw_pages = saw_pages || l.rfind(pages, 0) == 0;
    }
    EXPECT_TRUE(saw_bound) << bound << " not in the log";
    EXPECT_TRUE(saw_pages) << pages << "... not in the log";
  }
  for (const auto& l : lines) std::printf("log: %s\n", l.c_str());
}

}  // namespace
}  // namespace tpcomm
