// Loading NVML at run time.
#include "nvml_library.hpp"

#include <fmt/format.h>

namespace tpcomm::probe {

std::unique_ptr<NvmlLibrary> NvmlLibrary::load(std::string* why_not) {
  std::string err;
  auto library = common::SharedLibrary::open("libnvidia-ml.so.1", &err);
  if (!library) {
    *why_not = fmt::format(
        "libnvidia-ml.so.1 could not be loaded ({}): NVLink and fabric facts unknown", err);
    return nullptr;
  }
  std::unique_ptr<NvmlLibrary> n(new NvmlLibrary());
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  library->bind(init, "nvmlInit_v2");
  library->bind(shutdown, "nvmlShutdown");
  library->bind(n->error_string_, "nvmlErrorString");
  library->bind(n->handle_by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  library->bind(n->link_state, "nvmlDeviceGetNvLinkState");
  library->bind(n->link_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  library->bind(n->link_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType", false);
  library->bind(n->fabric_info, "nvmlDeviceGetGpuFabricInfo", false);
  if (!library->missing().empty()) {
    *why_not = fmt::format("libnvidia-ml.so.1 lacks {}: NVLink and fabric facts unknown",
                           library->missing());
    return nullptr;
  }
  if (int rc = init(); rc != nvml::kSuccess) {
    *why_not =
        fmt::format("nvmlInit failed ({}): NVLink and fabric facts unknown", n->error_text(rc));
    return nullptr;
  }
  n->shutdown_ = shutdown;
  n->library_ = std::move(library);
  return n;
}

NvmlLibrary::~NvmlLibrary() {
  if (shutdown_ != nullptr) shutdown_();
}

std::string NvmlLibrary::error_text(int result) const {
  const char* text = error_string_ ? error_string_(result) : nullptr;
  return fmt::format("NVML error {}: {}", result, text ? text : "no description");
}

}  // namespace tpcomm::probe
