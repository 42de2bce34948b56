#include "mpi_plugin.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::control {
namespace {

constexpr const char* kPluginName = "libtpcomm_mpi.so";

// Where to look, in order (see mpi_plugin()).
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (auto path = env_raw("TPCOMM_MPI_PLUGIN")) return {*path};
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&mpi_plugin), &info) != 0 && info.dli_fname != nullptr) {
    std::string dir(info.dli_fname);
    dir = dir.substr(0, dir.find_last_of('/') + 1);
    out.push_back(dir + kPluginName);
    out.push_back(dir + "../lib/" + kPluginName);
  }
  for (const char* dir : {TPCOMM_MPI_PLUGIN_BUILD_DIR, TPCOMM_MPI_PLUGIN_INSTALL_DIR}) {
    out.push_back(std::string(dir) + "/" + kPluginName);
  }
  out.push_back(kPluginName);  // LD_LIBRARY_PATH, the cache, the default folders
  return out;
}

const TpcommMpiApi* load(std::string* why) {
  for (const auto& path : candidates()) {
    // Global: Open MPI's own components, which it opens later, resolve libmpi's symbols.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      *why += fmt::format("; {}: {}", path, error ? error : "cannot be opened");
      continue;
    }
    auto entry = reinterpret_cast<const TpcommMpiApi* (*)()>(dlsym(handle, "tpcomm_mpi_api"));
    const TpcommMpiApi* api = entry ? entry() : nullptr;
    if (api != nullptr && api->version == TPCOMM_MPI_API_VERSION) return api;
    *why += fmt::format("; {}: not a tpcomm MPI plug-in of interface version {}", path,
                        TPCOMM_MPI_API_VERSION);
    dlclose(handle);
  }
  return nullptr;
}

}  // namespace

const TpcommMpiApi& mpi_plugin() {
  static std::mutex mutex;
  static const TpcommMpiApi* api = nullptr;
  static std::string why;
  std::lock_guard<std::mutex> lock(mutex);
  if (api == nullptr && why.empty()) api = load(&why);
  if (api == nullptr) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("the MPI bootstrap needs {}, which could not be loaded{} (set "
                            "TPCOMM_MPI_PLUGIN to its path, or export MASTER_ADDR and MASTER_PORT "
                            "to rendezvous through a store under mpirun)",
                            kPluginName, why));
  }
  return *api;
}

}  // namespace tpcomm::control
