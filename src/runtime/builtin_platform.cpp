// The built-in platform: this machine's probe and the backends of this build.
#include "communicator_state.hpp"
#include "transport/gloo/gloo_backend.hpp"
#include "transport/hier/hier_backend.hpp"
#include "transport/local/local_backend.hpp"
#include "transport/shm/shm_backend.hpp"

namespace tpcomm::runtime {

Platform builtin_platform() {
  return Platform{.factories = builtin_backend_factories(),
                  .probe = probe_local,
                  .gpu_unavailable_reason = gpu_build_unavailable_reason,
                  .node_of_ranks = {}};
}

std::map<Backend, BackendFactory> builtin_backend_factories() {
  std::map<Backend, BackendFactory> f;
  f[Backend::kLocal] = [](const BackendContext&) { return transport::make_local_backend(); };
  f[Backend::kGloo] = transport::make_gloo_backend;
  f[Backend::kShm] = transport::make_shm_backend;
  f[Backend::kHier] = transport::make_hier_backend;
  f[Backend::kHierMpi] = transport::make_hier_mpi_backend;
  add_gpu_backend_factories(f);
  return f;
}

}  // namespace tpcomm::runtime
