// The device guard's logic (docs/gpu-graphs.md, "The caller's current device";
// transport/cuda/basic_device_guard.hpp) on a fake runtime: the calling thread's current device
// comes back, a device that cannot be made current changes nothing, and a guard entered in a
// destructor gives the device back after the owner's members.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <vector>

#include "transport/cuda/basic_device_guard.hpp"

namespace tpcomm::transport::cuda {
namespace {

// One thread's current device, as the CUDA runtime keeps it.
struct FakeRuntime {
  static inline int current = 0;
  static inline bool get_fails = false;
  static inline std::set<int> broken;   // devices that cannot be made current
  static inline std::vector<int> sets;  // every set_device, in order
  static inline int cleared = 0;

  static void reset(int device) {
    current = device;
    get_fails = false;
    broken.clear();
    sets.clear();
    cleared = 0;
  }
  static int get_device(int* d) {
    if (get_fails) return 3;
    *d = current;
    return 0;
  }
  static int set_device(int d) {
    sets.push_back(d);
    if (broken.count(d) != 0) return 101;  // cudaErrorInvalidDevice
    current = d;
    return 0;
  }
  static void clear_error() { ++cleared; }
  static void fail(int error, const char* what) {
    if (error != 0) throw std::runtime_error(what);
  }
};

using Guard = BasicDeviceGuard<FakeRuntime>;

TEST(DeviceGuard, TheCallersDeviceComesBack) {
  FakeRuntime::reset(0);
  {
    const Guard on_device(3);
    EXPECT_EQ(FakeRuntime::current, 3);
    EXPECT_TRUE(on_device.current());
  }
  EXPECT_EQ(FakeRuntime::current, 0) << "the caller's thread kept the communicator's device";
  EXPECT_EQ(FakeRuntime::sets, (std::vector<int>{3, 0}));
}

TEST(DeviceGuard, TheSameDeviceIsNeitherSetNorRestored) {
  FakeRuntime::reset(2);
  { const Guard on_device(2); }
  { const Guard on_device(2, std::nothrow); }
  EXPECT_TRUE(FakeRuntime::sets.empty());
  EXPECT_EQ(FakeRuntime::current, 2);
}

TEST(DeviceGuard, ADeviceThatCannotBeMadeCurrentThrowsOrChangesNothing) {
  FakeRuntime::reset(1);
  FakeRuntime::broken = {5};
  EXPECT_THROW(Guard(5), std::runtime_error);
  EXPECT_EQ(FakeRuntime::current, 1);
  {
    const Guard on_device(5, std::nothrow);
    EXPECT_FALSE(on_device.current());
    EXPECT_GT(FakeRuntime::cleared, 0) << "the runtime's last error left for the caller";
  }
  EXPECT_EQ(FakeRuntime::current, 1);
  EXPECT_EQ(FakeRuntime::sets, (std::vector<int>{5, 5})) << "nothing restored that never changed";
}

TEST(DeviceGuard, AnUnknownPreviousDeviceIsNotRestored) {
  FakeRuntime::reset(0);
  FakeRuntime::get_fails = true;
  { const Guard on_device(4); }
  EXPECT_EQ(FakeRuntime::sets, (std::vector<int>{4}));
}

// A backend declares the guard first and enters it in its destructor: its members are destroyed
// after the destructor's body, and must still find its device current.
struct Member {
  std::vector<int>* seen;
  ~Member() { seen->push_back(FakeRuntime::current); }
};
struct Backend {
  Guard teardown_device;  // first: destroyed last
  Member member;
  ~Backend() { teardown_device.enter(6); }
};

TEST(DeviceGuard, EnteredInADestructorItOutlivesTheOtherMembers) {
  FakeRuntime::reset(1);
  std::vector<int> seen;
  { Backend b{{}, {&seen}}; }
  EXPECT_EQ(seen, (std::vector<int>{6})) << "a member's destructor ran on the caller's device";
  EXPECT_EQ(FakeRuntime::current, 1);
}

TEST(DeviceGuard, EnterRunsOnce) {
  FakeRuntime::reset(0);
  {
    Guard g;
    EXPECT_FALSE(g.current());
    EXPECT_TRUE(g.enter(2));
    EXPECT_TRUE(g.enter(7)) << "a second enter changes nothing";
    EXPECT_EQ(FakeRuntime::current, 2);
  }
  EXPECT_EQ(FakeRuntime::current, 0);
}

}  // namespace
}  // namespace tpcomm::transport::cuda
