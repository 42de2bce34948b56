// The NVML entry points the probe needs (NVLink state and GPU fabric info), loaded with dlopen.
// Structures and constants follow nvml.h's stable ABI.
#pragma once

#include <memory>
#include <string>

#include "common/shared_library.hpp"

namespace tpcomm::probe {

namespace nvml {
using Device = struct Opaque*;
constexpr int kSuccess = 0;
constexpr int kErrorNotSupported = 3;
constexpr unsigned kMaxLinks = 18;
constexpr unsigned kLinkDeviceGpu = 0;
constexpr unsigned kLinkDeviceSwitch = 2;

struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};

constexpr unsigned char kFabricNotSupported = 0;
constexpr unsigned char kFabricNotStarted = 1;
constexpr unsigned char kFabricInProgress = 2;
constexpr unsigned char kFabricCompleted = 3;

struct FabricInfo {
  unsigned char cluster_uuid[16];
  int status;
  unsigned clique_id;
  unsigned char state;
};
}  // namespace nvml

class NvmlLibrary {
 public:
  // nullptr when libnvidia-ml.so.1 cannot be loaded or initialised; `why_not` says why.
  static std::unique_ptr<NvmlLibrary> load(std::string* why_not);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  std::string error_text(int result) const;

  int (*handle_by_bus_id)(const char* bus_id, nvml::Device* device) = nullptr;
  int (*link_state)(nvml::Device device, unsigned link, int* active) = nullptr;
  int (*link_remote_pci)(nvml::Device device, unsigned link, nvml::PciInfo* pci) = nullptr;
  // Optional (newer drivers): nullptr when absent.
  int (*link_remote_type)(nvml::Device device, unsigned link, unsigned* type) = nullptr;
  int (*fabric_info)(nvml::Device device, nvml::FabricInfo* info) = nullptr;

 private:
  NvmlLibrary() = default;
  std::unique_ptr<common::SharedLibrary> library_;
  int (*shutdown_)() = nullptr;  // set once nvmlInit succeeded
  const char* (*error_string_)(int result) = nullptr;
};

}  // namespace tpcomm::probe
