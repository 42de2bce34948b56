// A fake libnvidia-ml.so.1 for probe tests (see fake_gpu_config.hpp).
#include <cstdint>

#include "fake_gpu_config.hpp"

namespace {
constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;

struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct FabricInfo {
  unsigned char cluster_uuid[16];
  int status;
  unsigned clique_id;
  unsigned char state;
};

int gpu_of(void* handle) {
  return static_cast<int>(reinterpret_cast<std::intptr_t>(handle)) - 1;
}
// The other end of a link: -1 for the NVSwitch, a GPU index, or -2 for no link.
int remote_of(int gpu, unsigned link) {
  const std::string links = fake_gpu::links();
  if (links == "switch") return link < 4 ? -1 : -2;
  if (links == "pairs") {
    int peer = gpu ^ 1;
    return link < 2 && peer < fake_gpu::count() ? peer : -2;
  }
  return -2;
}
}  // namespace

extern "C" {

int nvmlInit_v2() {
  return kSuccess;
}
int nvmlShutdown() {
  return kSuccess;
}
const char* nvmlErrorString(int) {
  return "fake NVML error";
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  int gpu = fake_gpu::gpu_of_bus_id(bus_id);
  if (gpu < 0) return kNotFound;
  *device = reinterpret_cast<void*>(static_cast<std::intptr_t>(gpu + 1));
  return kSuccess;
}
int nvmlDeviceGetNvLinkState(void* device, unsigned link, int* active) {
  if (fake_gpu::links() == "none") return kNotSupported;
  *active = remote_of(gpu_of(device), link) != -2;
  return kSuccess;
}
int nvmlDeviceGetNvLinkRemoteDeviceType(void* device, unsigned link, unsigned* type) {
  int remote = remote_of(gpu_of(device), link);
  if (remote == -2) return kInvalidArgument;
  *type = remote == -1 ? 2u : 0u;
  return kSuccess;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned link, PciInfo* pci) {
  int remote = remote_of(gpu_of(device), link);
  if (remote == -2) return kInvalidArgument;
  *pci = PciInfo{};
  std::snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02X:00.0",
                remote == -1 ? 0xE0 : fake_gpu::bus_of(remote));
  return kSuccess;
}
int nvmlDeviceGetGpuFabricInfo(void*, FabricInfo* info) {
  const std::string fabric = fake_gpu::fabric();
  if (fabric == "unsupported") return kNotSupported;
  *info = FabricInfo{};
  if (fabric == "in_progress") {
    info->state = 2;
    return kSuccess;
  }
  info->state = 3;
  if (fabric != "zero") {
    for (int i = 0; i < 16; ++i) info->cluster_uuid[i] = static_cast<unsigned char>(0xa0 + i);
    info->clique_id = static_cast<unsigned>(std::atoi(fabric.c_str()));
  }
  return kSuccess;
}

}  // extern "C"
