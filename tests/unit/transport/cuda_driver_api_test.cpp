// The driver entry points are requested at the version each was introduced (docs/gpu.md, "Status"):
// asked at 12000, the multicast calls (12.1) came back null on every driver and multimem never
// switched on. A fake entry-point query that behaves like a driver of a given version checks it.
#include <gtest/gtest.h>

#ifdef TPCOMM_HAVE_CUDA
#include <map>
#include <string>

#include "transport/cuda/driver_api.hpp"

namespace tpcomm::transport::cuda {
namespace {

// From cudaTypedefs.h's PFN_<symbol>_v<version>: the version each symbol's signature has.
const std::map<std::string, int> kIntroduced = {
    {"cuMemGetAllocationGranularity", 10020},
    {"cuMemCreate", 10020},
    {"cuMemRelease", 10020},
    {"cuMemExportToShareableHandle", 10020},
    {"cuMemImportFromShareableHandle", 10020},
    {"cuMemAddressReserve", 10020},
    {"cuMemAddressFree", 10020},
    {"cuMemMap", 10020},
    {"cuMemUnmap", 10020},
    {"cuMemSetAccess", 10020},
    {"cuMemGetAccess", 10020},
    {"cuGetErrorString", 6000},
    {"cuMemGetAddressRange", 3020},
    {"cuMemRetainAllocationHandle", 11000},
    {"cuDeviceGet", 2000},
    {"cuDeviceGetAttribute", 2000},
    {"cuMulticastCreate", 12010},
    {"cuMulticastAddDevice", 12010},
    {"cuMulticastBindMem", 12010},
    {"cuMulticastGetGranularity", 12010},
    {"cuMulticastUnbind", 12010},
};

int some_function() {
  return 0;
}

// A driver of `driver_version`: a symbol exists from its introduction on; asking for it at a
// version below its introduction fails, as cudaGetDriverEntryPointByVersion does.
EntryPointQuery driver_of_version(int driver_version, std::map<std::string, int>* asked) {
  return [=](const char* symbol, int version) -> void* {
    (*asked)[symbol] = version;
    auto it = kIntroduced.find(symbol);
    if (it == kIntroduced.end() || it->second > driver_version || version < it->second) {
      return nullptr;
    }
    return reinterpret_cast<void*>(&some_function);
  };
}

TEST(DriverEntryPoints, MulticastResolvesOnA121DriverAndEverySymbolAtItsOwnVersion) {
  for (int driver : {12010, 12080, 13000}) {
    std::map<std::string, int> asked;
    std::string missing;
    DriverApi api = resolve_driver_api(driver_of_version(driver, &asked), &missing);
    EXPECT_EQ(missing, "") << "driver " << driver;
    EXPECT_NE(api.multicast_create, nullptr) << "driver " << driver;
    EXPECT_NE(api.multicast_unbind, nullptr) << "driver " << driver;
    EXPECT_EQ(api.multicast_missing, "");
    EXPECT_EQ(asked, kIntroduced) << "every symbol asked for, at its own version";
  }
}

TEST(DriverEntryPoints, A120DriverHasNoMulticastAndSaysWhichSymbolAtWhichVersion) {
  std::map<std::string, int> asked;
  std::string missing;
  DriverApi api = resolve_driver_api(driver_of_version(12000, &asked), &missing);
  EXPECT_EQ(missing, "");
  EXPECT_NE(api.mem_create, nullptr);
  EXPECT_EQ(api.multicast_create, nullptr);
  EXPECT_EQ(api.multicast_missing, "cuMulticastCreate at entry point version 12010");
}

TEST(DriverEntryPoints, AMissingRequiredSymbolIsNamedWithItsVersion) {
  std::string missing;
  resolve_driver_api(
      [](const char* symbol, int) -> void* {
        return std::string(symbol) == "cuMemRetainAllocationHandle"
                   ? nullptr
                   : reinterpret_cast<void*>(&some_function);
      },
      &missing);
  EXPECT_EQ(missing, "cuMemRetainAllocationHandle at entry point version 11000");
}

}  // namespace
}  // namespace tpcomm::transport::cuda
#else
TEST(DriverEntryPoints, NeedsACudaBuild) {
  GTEST_SKIP() << "built without CUDA (nvcc not found): the driver entry points are not compiled";
}
#endif
