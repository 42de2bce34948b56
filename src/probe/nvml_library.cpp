// Loading NVML at run time.
#include "nvml_library.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

namespace tpcomm::probe_detail {

std::unique_ptr<NvmlLibrary> NvmlLibrary::load(std::string* why_not) {
  void* handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    *why_not = fmt::format(
        "libnvidia-ml.so.1 could not be loaded ({}): NVLink and fabric facts "
        "unknown",
        err ? err : "unknown reason");
    return nullptr;
  }
  std::unique_ptr<NvmlLibrary> n(new NvmlLibrary());
  n->handle_ = handle;
  std::string missing;
  auto bind = [&](auto& fn, const char* name, bool required) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr && required) missing += missing.empty() ? name : std::string(", ") + name;
  };
  int (*init)() = nullptr;
  bind(init, "nvmlInit_v2", true);
  bind(n->shutdown_, "nvmlShutdown", true);
  bind(n->error_string_, "nvmlErrorString", true);
  bind(n->handle_by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2", true);
  bind(n->link_state, "nvmlDeviceGetNvLinkState", true);
  bind(n->link_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2", true);
  bind(n->link_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType", false);
  bind(n->fabric_info, "nvmlDeviceGetGpuFabricInfo", false);
  if (!missing.empty()) {
    *why_not = fmt::format("libnvidia-ml.so.1 lacks {}: NVLink and fabric facts unknown", missing);
    n->shutdown_ = nullptr;  // never initialised
    return nullptr;
  }
  if (int rc = init(); rc != nvml::kSuccess) {
    *why_not =
        fmt::format("nvmlInit failed ({}): NVLink and fabric facts unknown", n->error_text(rc));
    n->shutdown_ = nullptr;
    return nullptr;
  }
  return n;
}

NvmlLibrary::~NvmlLibrary() {
  if (shutdown_ != nullptr) shutdown_();
  if (handle_ != nullptr) dlclose(handle_);
}

std::string NvmlLibrary::error_text(int result) const {
  const char* text = error_string_ ? error_string_(result) : nullptr;
  return fmt::format("NVML error {}: {}", result, text ? text : "no description");
}

}  // namespace tpcomm::probe_detail
