// Explicit placement of a rank's pages (transport/cpu/numa_placement): for each CPU this process
// may use, a thread bound to it binds a tmpfs mapping (what the shm slot is) to its NUMA node; a
// thread on another CPU then allocates and touches every page first; the pages must still be on the
// binder's node, read back with the move_pages system call (not hwloc, which the library uses),
// and the policy read back with get_mempolicy must name that node (bound, or preferred where
// the kernel has MPOL_PREFERRED_MANY: hwloc's binding that is not strict). The node of a
// CPU comes from sysfs. On a machine of one node every page lands there whatever the placement:
// the test still runs, checks the policy, and says so.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "transport/cpu/numa_placement.hpp"
#include "transport/cpu/thread_team.hpp"

namespace tpcomm {
namespace {

constexpr int kMpolBind = 2;           // <numaif.h>'s MPOL_BIND
constexpr int kMpolPreferredMany = 5;  // MPOL_PREFERRED_MANY: hwloc's non-strict binding
constexpr int kMpolFAddr = 1 << 1;     // MPOL_F_ADDR

// The NUMA node of `cpu` as sysfs says (a "nodeN" entry in its folder); 0 without one.
int sysfs_node_of(int cpu) {
  const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
  DIR* d = opendir(dir.c_str());
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

void bind_this_thread(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
}

TEST(NumaPlacement, ARanksPagesAreOnItsNodeWhoeverTouchesThemFirst) {
  const cpu_set_t usable = transport::cpu::current_cpus();
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &usable)) cpus.push_back(c);
  }
  ASSERT_FALSE(cpus.empty());
  std::printf("machine: %d NUMA node(s)%s\n", transport::cpu::numa_node_count(),
              transport::cpu::numa_node_count() == 1
                  ? ": every page is on node 0 whatever the placement; the binding is checked by "
                    "its policy"
                  : "");
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t pages = 8;
  for (int cpu : cpus) {
    const int node = sysfs_node_of(cpu);
    const int fd = memfd_create("tpcomm-placement-test", MFD_CLOEXEC);  // tmpfs, as /dev/shm
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(pages * page)), 0);
    void* p = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT_NE(p, MAP_FAILED);
    std::string did;
    std::thread binder([&] {
      bind_this_thread(cpu);
      did = transport::cpu::bind_pages(p, pages * page, transport::cpu::nodes_of_this_rank());
    });
    binder.join();
    if (cpus.size() > 1 || transport::cpu::numa_node_count() > 1) {
      EXPECT_EQ(did, "bound to node " + std::to_string(node)) << "cpu " << cpu;
    }
    // Another CPU allocates and touches every page first.
    std::thread toucher([&] {
      bind_this_thread(cpus[(cpu == cpus.front() ? cpus.size() - 1 : 0)]);
      ASSERT_EQ(posix_fallocate(fd, 0, static_cast<off_t>(pages * page)), 0);
      std::memset(p, 0x5a, pages * page);
    });
    toucher.join();
    std::vector<void*> addresses;
    for (std::size_t i = 0; i < pages; ++i) addresses.push_back(static_cast<char*>(p) + i * page);
    std::vector<int> status(pages, -100);
    ASSERT_EQ(syscall(SYS_move_pages, 0, pages, addresses.data(), nullptr, status.data(), 0), 0);
    for (std::size_t i = 0; i < pages; ++i) {
      EXPECT_EQ(status[i], node) << "cpu " << cpu << " page " << i;
    }
    EXPECT_EQ(transport::cpu::nodes_of_pages(p, pages * page), std::vector<int>(pages, node));
    if (did.rfind("bound", 0) == 0) {
      int mode = -1;
      unsigned long mask[16] = {};
      ASSERT_EQ(syscall(SYS_get_mempolicy, &mode, mask, 1024, p, kMpolFAddr), 0);
      EXPECT_TRUE(mode == kMpolBind || mode == kMpolPreferredMany)
          << "cpu " << cpu << " mode " << mode;
      EXPECT_EQ(mask[node / 64], 1ul << (node % 64)) << "cpu " << cpu;
    }
    std::printf("cpu %d: %s; %zu pages on node %d (sysfs: node %d)\n", cpu, did.c_str(), pages,
                status[0], node);
    munmap(p, pages * page);
    close(fd);
  }
}

TEST(NumaPlacement, ARankThatMayRunAnywhereLeavesPlacementToFirstTouch) {
  std::thread unbound([] {
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); ++c) CPU_SET(c, &all);
    if (sched_setaffinity(0, sizeof(all), &all) != 0) return;  // a cpuset narrower than online
    EXPECT_TRUE(transport::cpu::nodes_of_this_rank().empty());
    char page[1];
    EXPECT_NE(transport::cpu::bind_pages(page, 0, {}).find("not bound"), std::string::npos);
  });
  unbound.join();
}

}  // namespace
}  // namespace tpcomm
