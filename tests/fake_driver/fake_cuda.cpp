// A fake libcuda.so.1 for probe tests (see fake_gpu_config.hpp).
#include "fake_gpu_config.hpp"

namespace {
constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kNotInitialized = 3;
constexpr int kNoDevice = 100;
constexpr int kInvalidDevice = 101;
bool initialised = false;
}  // namespace

extern "C" {

int cuInit(unsigned) {
  if (fake_gpu::count() == 0) return kNoDevice;
  initialised = true;
  return kSuccess;
}
int cuDriverGetVersion(int* v) {
  *v = 13000;
  return kSuccess;
}
int cuDeviceGetCount(int* n) {
  if (!initialised) return kNotInitialized;
  *n = fake_gpu::count();
  return kSuccess;
}
int cuDeviceGet(int* dev, int ordinal) {
  if (ordinal < 0 || ordinal >= fake_gpu::count()) return kInvalidDevice;
  *dev = ordinal;
  return kSuccess;
}
int cuDeviceGetAttribute(int* value, int attribute, int dev) {
  if (dev < 0 || dev >= fake_gpu::count()) return kInvalidDevice;
  const int sm = fake_gpu::sm();
  const std::string fabric = fake_gpu::fabric();
  switch (attribute) {
    case 75:
      *value = sm / 10;
      return kSuccess;
    case 76:
      *value = sm % 10;
      return kSuccess;
    case 102:
      *value = 1;
      return kSuccess;
    case 103:
      *value = 1;
      return kSuccess;
    case 128:
      *value = fabric != "unsupported";
      return kSuccess;
    case 132:
      *value = sm >= 90;
      return kSuccess;
    default:
      return kInvalidValue;
  }
}
int cuDeviceCanAccessPeer(int* can, int dev, int peer) {
  *can = fake_gpu::p2p() && dev != peer;
  return kSuccess;
}
int cuDeviceGetPCIBusId(char* out, int len, int dev) {
  std::snprintf(out, static_cast<size_t>(len), "0000:%02X:00.0", fake_gpu::bus_of(dev));
  return kSuccess;
}
int cuGetErrorName(int rc, const char** name) {
  *name = rc == kNoDevice ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_FAKE";
  return kSuccess;
}
int cuGetErrorString(int rc, const char** text) {
  *text = rc == kNoDevice ? "no CUDA-capable device is detected" : "fake error";
  return kSuccess;
}

}  // extern "C"
