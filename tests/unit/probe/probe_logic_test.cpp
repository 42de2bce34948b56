// The probe's pure parts (NVLink islands, ISA parsing) and its behaviour on this machine.
#include <gtest/gtest.h>

#include "probe/nvlink_islands.hpp"
#include "probe/probe_parts.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/probe.hpp"

namespace tpcomm::probe {
namespace {

GpuLinks gpu(const std::string& bus, std::vector<ActiveLink> links) {
  return {bus, links};
}
ActiveLink to_switch() {
  return {LinkPeer::kSwitch, "00000000:E0:00.0"};
}
ActiveLink to_gpu(const std::string& bus) {
  return {LinkPeer::kGpu, bus};
}

TEST(NvlinkIslands, NvSwitchJoinsEveryLinkedGpu) {
  std::vector<GpuLinks> g;
  for (int i = 0; i < 8; ++i)
    g.push_back(gpu("0000:1" + std::to_string(i) + ":00.0", {to_switch()}));
  auto islands = nvlink_islands(g);
  for (const auto& i : islands) EXPECT_EQ(i, 0);
}

TEST(NvlinkIslands, BridgedPairsAreSeparateIslandsAndUnlinkedGpusHaveNone) {
  std::vector<GpuLinks> g = {
      gpu("0000:10:00.0", {to_gpu("00000000:11:00.0")}),
      gpu("0000:11:00.0", {to_gpu("00000000:10:00.0")}),
      gpu("0000:12:00.0", {to_gpu("00000000:13:00.0")}),
      gpu("0000:13:00.0", {to_gpu("00000000:12:00.0")}),
      gpu("0000:14:00.0", {}),
  };
  auto islands = nvlink_islands(g);
  EXPECT_EQ(islands, (std::vector<std::optional<int>>{0, 0, 1, 1, std::nullopt}));
}

TEST(NvlinkIslands, LinkToAnInvisibleGpuStillCountsAsNvlink) {
  auto islands = nvlink_islands({gpu("0000:10:00.0", {to_gpu("0000:99:00.0")}),
                                 gpu("0000:11:00.0", {to_gpu("0000:98:00.0")})});
  EXPECT_EQ(islands, (std::vector<std::optional<int>>{0, 1}));
}

TEST(NvlinkIslands, BusIdsAreNormalised) {
  EXPECT_EQ(normalize_bus_id("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalize_bus_id("0000:1b:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalize_bus_id("garbage"), "garbage");
}

TEST(CpuIsa, ParsesX86FlagsAndArmFeatures) {
  EXPECT_EQ(
      isa_from_cpuinfo("processor : 0\nflags : fpu sse4_2 avx avx2 fma avx512f avx512_bf16\n"),
      (std::vector<std::string>{"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16"}));
  EXPECT_EQ(isa_from_cpuinfo("Features\t: fp asimd asimdhp sve bf16\n"),
            (std::vector<std::string>{"asimd", "asimdhp", "sve", "bf16"}));
  EXPECT_TRUE(isa_from_cpuinfo("no flags here\n").empty());
}

TEST(ProbeOnThisMachine, NeverThrowsAndExplainsTheCudaState) {
  LocalFacts f;
  ASSERT_NO_THROW(f = probe_local());
  EXPECT_FALSE(f.host.hostname.empty());
  EXPECT_FALSE(f.cuda_status.empty());
  if (f.gpus.empty()) {
    std::cout << "[ info ] no CUDA device here: " << f.cuda_status << "\n";
    try {
      local_facts_table(f, 2, DeviceType::kCuda);
      ADD_FAILURE() << "cuda facts without a device must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(f.cuda_status), std::string::npos);
    }
  }
  FactsTable cpu = local_facts_table(f, 3, DeviceType::kCpu);
  ASSERT_EQ(cpu.ranks.size(), 3u);
  EXPECT_EQ(cpu.ranks[2].host, f.host.hostname);
  EXPECT_EQ(cpu.ranks[2].device.type, DeviceType::kCpu);
  EXPECT_NE(cpu.comment->find(f.host.boot_id), std::string::npos);
}

}  // namespace
}  // namespace tpcomm::probe
