// Ranks to cores (tools/launcher/cpu_binding.hpp) on machines described to hwloc: hardware threads
// numbered side by side (many VMs), numbered a package apart (most bare-metal x86), CPUs this
// process may not use, and more ranks than cores or threads.
#include "launcher/cpu_binding.hpp"

#include <gtest/gtest.h>

#include <initializer_list>

namespace tpcomm::cli {
namespace {

cpu_set_t cpus(std::initializer_list<int> list) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int cpu : list) CPU_SET(cpu, &s);
  return s;
}

cpu_set_t first_cpus(int n) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int cpu = 0; cpu < n; ++cpu) CPU_SET(cpu, &s);
  return s;
}

std::vector<int> list_of(const cpu_set_t& s) {
  std::vector<int> out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &s)) out.push_back(cpu);
  }
  return out;
}

std::vector<std::vector<int>> lists_of(const RankBinding& b) {
  std::vector<std::vector<int>> out;
  for (const auto& s : b.cpus) out.push_back(list_of(s));
  return out;
}

TEST(CpuBinding, SiblingThreadsNumberedSideBySideGoToOneRankNotTwo) {
  // Four cores of two threads, CPUs 0,1 on core 0: "rank r on CPU r" put ranks 0 and 1 on core 0.
  const CoreThreads cores = usable_cores(first_cpus(8), "core:4 pu:2");
  EXPECT_EQ(cores, (CoreThreads{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  const RankBinding two = bind_ranks(cores, 2);
  EXPECT_EQ(two.level, BindLevel::kCore);
  EXPECT_EQ(lists_of(two), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(lists_of(bind_ranks(cores, 4)),
            (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(CpuBinding, SiblingThreadsAPackageApartFormOneCore) {
  const CoreThreads cores =
      usable_cores(first_cpus(8), "pack:2 core:2 pu:2(indexes=0,4,1,5,2,6,3,7)");
  EXPECT_EQ(cores, (CoreThreads{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(lists_of(bind_ranks(cores, 3)),
            (std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}}));
}

TEST(CpuBinding, MoreRanksThanCoresTakeEveryCoresFirstThreadBeforeAnySecond) {
  const CoreThreads cores = usable_cores(first_cpus(8), "core:4 pu:2");
  const RankBinding six = bind_ranks(cores, 6);
  EXPECT_EQ(six.level, BindLevel::kThread);
  EXPECT_EQ(lists_of(six), (std::vector<std::vector<int>>{{0}, {2}, {4}, {6}, {1}, {3}}));
  const RankBinding eight = bind_ranks(cores, 8);
  EXPECT_EQ(eight.level, BindLevel::kThread);
  EXPECT_EQ(eight.cpus.size(), 8u);
}

TEST(CpuBinding, RanksWithTeamsGetEqualSharesOfConsecutiveCores) {
  // Two packages of four cores of two threads: two ranks get a package each, three ranks two
  // cores each (the eighth core idles rather than one rank getting more).
  const CoreThreads cores = usable_cores(first_cpus(16), "pack:2 core:4 pu:2");
  EXPECT_EQ(
      lists_of(bind_ranks(cores, 2, true)),
      (std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}));
  EXPECT_EQ(lists_of(bind_ranks(cores, 3, true)),
            (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}}));
  // As many ranks as cores: a core each, as without shares; more ranks: a thread each.
  EXPECT_EQ(lists_of(bind_ranks(cores, 8, true)), lists_of(bind_ranks(cores, 8)));
  const RankBinding twelve = bind_ranks(cores, 12, true);
  EXPECT_EQ(twelve.level, BindLevel::kThread);
  EXPECT_EQ(twelve.cpus.size(), 12u);
}

TEST(CpuBinding, MoreRanksThanThreadsAreNotBound) {
  const CoreThreads cores = usable_cores(first_cpus(8), "core:4 pu:2");
  const RankBinding nine = bind_ranks(cores, 9);
  EXPECT_EQ(nine.level, BindLevel::kNone);
  EXPECT_TRUE(nine.cpus.empty());
  EXPECT_EQ(bind_ranks(cores, 0).level, BindLevel::kNone);
  EXPECT_EQ(bind_ranks({}, 1).level, BindLevel::kNone);
}

TEST(CpuBinding, OnlyTheCpusThisProcessMayUseAreHandedOut) {
  // Core 0 half usable, core 1 whole, core 2 not at all (taskset -c 1-3, or a cgroup).
  const CoreThreads cores = usable_cores(cpus({1, 2, 3}), "core:3 pu:2");
  EXPECT_EQ(cores, (CoreThreads{{1}, {2, 3}}));
  EXPECT_EQ(lists_of(bind_ranks(cores, 2)), (std::vector<std::vector<int>>{{1}, {2, 3}}));
  EXPECT_EQ(lists_of(bind_ranks(cores, 3)), (std::vector<std::vector<int>>{{1}, {2}, {3}}));
  // Both usable CPUs on one core: two ranks get a thread each, not the core twice.
  const CoreThreads one = usable_cores(cpus({4, 5}), "core:3 pu:2");
  EXPECT_EQ(one, (CoreThreads{{4, 5}}));
  const RankBinding two = bind_ranks(one, 2);
  EXPECT_EQ(two.level, BindLevel::kThread);
  EXPECT_EQ(lists_of(two), (std::vector<std::vector<int>>{{4}, {5}}));
}

TEST(CpuBinding, AMachineHwlocCannotDescribeCountsEachUsableCpuAsACore) {
  const CoreThreads cores = usable_cores(cpus({0, 5, 9}), "not a topology");
  EXPECT_EQ(cores, (CoreThreads{{0}, {5}, {9}}));
  EXPECT_EQ(lists_of(bind_ranks(cores, 3)), (std::vector<std::vector<int>>{{0}, {5}, {9}}));
}

TEST(CpuBinding, DescriptionListsEachCoresThreadsAndStopsAtTheLimit) {
  const CoreThreads cores = usable_cores(first_cpus(8), "core:4 pu:2");
  EXPECT_EQ(describe_cores(cores), "0,1 | 2,3 | 4,5 | 6,7");
  EXPECT_EQ(describe_cores(cores, 2), "0,1 | 2,3 | ...");
}

TEST(CpuBinding, CpuListsAreWrittenAsRangesAsTasksetWritesThem) {
  EXPECT_EQ(cpu_list_text(cpus({3})), "3");
  EXPECT_EQ(cpu_list_text(cpus({0, 1})), "0-1");
  EXPECT_EQ(cpu_list_text(cpus({0, 1, 2, 3, 8, 10, 11})), "0-3,8,10-11");
  EXPECT_EQ(cpu_list_text(cpus({0, 2, 4})), "0,2,4");
  EXPECT_EQ(cpu_list_text(cpus({CPU_SETSIZE - 2, CPU_SETSIZE - 1})),
            std::to_string(CPU_SETSIZE - 2) + "-" + std::to_string(CPU_SETSIZE - 1));
  EXPECT_EQ(cpu_list_text(cpus({})), "");
}

}  // namespace
}  // namespace tpcomm::cli
