// Test double configuration shared by the fake libcuda.so.1 and libnvidia-ml.so.1: a pretend
// machine described by environment variables, so the probe's dlopen path runs without a GPU.
//   FAKE_GPU_COUNT   number of GPUs (0: cuInit fails with CUDA_ERROR_NO_DEVICE)
//   FAKE_GPU_SM      compute capability x 10 (default 90); multicast when >= 90
//   FAKE_GPU_LINKS   switch (all GPUs on NVSwitch), pairs (GPU 2k <-> 2k+1), none
//   FAKE_GPU_P2P     1 (default) or 0
//   FAKE_GPU_FABRIC  unsupported (default), in_progress, zero (completed, all-zero uuid),
//                    or a clique id: completed in that clique of one fixed cluster
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fake_gpu {

inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}
inline std::string env_str(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}
inline int count() {
  return env_int("FAKE_GPU_COUNT", 0);
}
inline int sm() {
  return env_int("FAKE_GPU_SM", 90);
}
inline std::string links() {
  return env_str("FAKE_GPU_LINKS", "switch");
}
inline bool p2p() {
  return env_int("FAKE_GPU_P2P", 1) != 0;
}
inline std::string fabric() {
  return env_str("FAKE_GPU_FABRIC", "unsupported");
}
inline int bus_of(int gpu) {
  return 0x10 + gpu;
}
// Index of the GPU with this PCI bus id ("0000:1b:00.0" or "00000000:1B:00.0"), or -1.
inline int gpu_of_bus_id(const char* bus_id) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return -1;
  int gpu = static_cast<int>(bus) - 0x10;
  return gpu >= 0 && gpu < count() ? gpu : -1;
}

}  // namespace fake_gpu
