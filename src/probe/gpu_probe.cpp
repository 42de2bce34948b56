// CUDA device facts: capabilities from the driver, NVLink islands and fabric info from NVML.
// Every failure is a status line, never an exception: a machine without a GPU is a normal case.
#include <fstream>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "cuda_driver.hpp"
#include "nvlink_islands.hpp"
#include "nvml_library.hpp"
#include "probe_parts.hpp"

namespace tpcomm::probe {
namespace {

std::optional<int> pci_numa_node(const std::string& bus_id) {
  std::ifstream f("/sys/bus/pci/devices/" + normalize_bus_id(bus_id) + "/numa_node");
  int node = -1;
  if (f >> node && node >= 0) return node;
  return std::nullopt;
}

std::string uuid_text(const unsigned char (&bytes)[16]) {
  std::string s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", bytes[i]);
  }
  return s;
}

std::optional<FabricInfo> read_fabric(const NvmlLibrary& nvml, nvml::Device dev, int ordinal) {
  if (nvml.fabric_info == nullptr) return std::nullopt;  // driver predates fabric info
  nvml::FabricInfo raw{};
  int rc = nvml.fabric_info(dev, &raw);
  if (rc == nvml::kErrorNotSupported) return FabricInfo{FabricState::kNotSupported, {}, {}};
  if (rc != nvml::kSuccess) {
    TPCOMM_LOG(kInfo, "probe", "GPU {}: fabric info unavailable ({})", ordinal,
               nvml.error_text(rc));
    return std::nullopt;
  }
  FabricInfo f;
  switch (raw.state) {
    case nvml::kFabricNotSupported:
      f.state = FabricState::kNotSupported;
      return f;
    case nvml::kFabricNotStarted:
      f.state = FabricState::kNotStarted;
      return f;
    case nvml::kFabricInProgress:
      f.state = FabricState::kInProgress;
      return f;
    case nvml::kFabricCompleted:
      f.state = FabricState::kCompleted;
      break;
    default:
      return std::nullopt;
  }
  if (raw.status != nvml::kSuccess) {
    // Registration finished with an error: the clique cannot be trusted.
    TPCOMM_LOG(kInfo, "probe", "GPU {}: fabric registration completed with {}", ordinal,
               nvml.error_text(raw.status));
    return f;
  }
  f.cluster_uuid = uuid_text(raw.cluster_uuid);  // all zeros stays visible; the planner ignores it
  f.clique_id = raw.clique_id;
  return f;
}

GpuLinks read_links(const NvmlLibrary& nvml, nvml::Device dev, const std::string& bus_id,
                    const std::vector<std::string>& gpu_bus_ids) {
  GpuLinks g{bus_id, {}};
  for (unsigned link = 0; link < nvml::kMaxLinks; ++link) {
    int active = 0;
    if (nvml.link_state(dev, link, &active) != nvml::kSuccess || active == 0) continue;
    ActiveLink a;
    nvml::PciInfo pci{};
    if (nvml.link_remote_pci(dev, link, &pci) == nvml::kSuccess) a.remote_bus_id = pci.bus_id;
    unsigned type = 0xff;
    if (nvml.link_remote_type != nullptr &&
        nvml.link_remote_type(dev, link, &type) == nvml::kSuccess) {
      a.peer = type == nvml::kLinkDeviceGpu      ? LinkPeer::kGpu
               : type == nvml::kLinkDeviceSwitch ? LinkPeer::kSwitch
                                                 : LinkPeer::kOther;
    } else {
      // Older drivers cannot say: a link to a GPU we know is a GPU link, else an NVSwitch.
      bool to_gpu = false;
      for (const auto& b : gpu_bus_ids)
        to_gpu |= normalize_bus_id(b) == normalize_bus_id(a.remote_bus_id);
      a.peer = to_gpu ? LinkPeer::kGpu : LinkPeer::kSwitch;
    }
    g.links.push_back(a);
  }
  return g;
}

void add_nvml_facts(GpuProbeResult& out, const std::vector<std::string>& bus_ids) {
  std::string why;
  auto nvml = NvmlLibrary::load(&why);
  if (!nvml) {
    out.nvml_status = why;
    TPCOMM_LOG(kInfo, "probe", "{}", why);
    return;
  }
  std::vector<GpuLinks> links(out.gpus.size());
  int fabric_known = 0;
  for (std::size_t i = 0; i < out.gpus.size(); ++i) {
    nvml::Device dev = nullptr;
    int rc = nvml->handle_by_bus_id(bus_ids[i].c_str(), &dev);
    links[i].bus_id = bus_ids[i];
    if (rc != nvml::kSuccess) {
      TPCOMM_LOG(kInfo, "probe", "GPU {} ({}): no NVML handle ({})", i, bus_ids[i],
                 nvml->error_text(rc));
      continue;
    }
    links[i] = read_links(*nvml, dev, bus_ids[i], bus_ids);
    out.gpus[i].fabric = read_fabric(*nvml, dev, static_cast<int>(i));
    fabric_known += out.gpus[i].fabric.has_value();
  }
  auto islands = nvlink_islands(links);
  int linked = 0;
  for (std::size_t i = 0; i < out.gpus.size(); ++i) {
    out.gpus[i].nvlink_island = islands[i];
    linked += islands[i].has_value();
  }
  out.nvml_status = fmt::format("NVML: {} of {} GPUs with active NVLink, fabric info for {}{}",
                                linked, out.gpus.size(), fabric_known,
                                nvml->fabric_info ? "" : " (driver has no fabric info query)");
}

}  // namespace

GpuProbeResult probe_gpus() {
  GpuProbeResult out;
  out.nvml_status = "not queried (no CUDA device)";
  std::string why;
  auto cuda = CudaDriver::load(&why);
  if (!cuda) {
    out.cuda_status = why;
    TPCOMM_LOG(kInfo, "probe", "no CUDA device: {}", why);
    return out;
  }
  if (int rc = cuda->init(0); rc != cu::kSuccess) {
    out.cuda_status = fmt::format(
        "cuInit failed: {} (is a GPU visible? check CUDA_VISIBLE_DEVICES "
        "and the driver with nvidia-smi)",
        cuda->error_text(rc));
    TPCOMM_LOG(kInfo, "probe", "no CUDA device: {}", out.cuda_status);
    return out;
  }
  int count = 0;
  int version = 0;
  cuda->driver_version(&version);
  if (int rc = cuda->device_count(&count); rc != cu::kSuccess || count == 0) {
    out.cuda_status =
        rc != cu::kSuccess
            ? fmt::format("cuDeviceGetCount failed: {}", cuda->error_text(rc))
            : std::string("the driver reports no CUDA device (check CUDA_VISIBLE_DEVICES)");
    TPCOMM_LOG(kInfo, "probe", "no CUDA device: {}", out.cuda_status);
    return out;
  }
  std::vector<int> handles(static_cast<std::size_t>(count));
  std::vector<std::string> bus_ids(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    int dev = 0;
    cuda->device_get(&dev, i);
    handles[static_cast<std::size_t>(i)] = dev;
    auto attr = [&](int a) {
      int v = 0;
      return cuda->device_attribute(&v, a, dev) == cu::kSuccess ? v : 0;
    };
    DeviceFacts d;
    d.type = DeviceType::kCuda;
    d.index = i;
    d.sm = attr(cu::kAttrComputeCapabilityMajor) * 10 + attr(cu::kAttrComputeCapabilityMinor);
    d.multicast = attr(cu::kAttrMulticastSupported) != 0;
    d.vmm = attr(cu::kAttrVirtualMemoryManagement) != 0;
    d.fabric_handle = attr(cu::kAttrHandleTypeFabric) != 0;
    char bus[32] = {};
    if (cuda->pci_bus_id(bus, sizeof(bus), dev) == cu::kSuccess)
      bus_ids[static_cast<std::size_t>(i)] = bus;
    d.numa = pci_numa_node(bus);
    out.gpus.push_back(d);
  }
  // p2p: every other local GPU reachable by peer access (trivially true for a single GPU).
  // The driver's claim is only a first filter; the communicator probes real transfers.
  for (int i = 0; i < count; ++i) {
    bool all = true;
    for (int j = 0; j < count; ++j) {
      int can = 0;
      if (i != j && (cuda->can_access_peer(&can, handles[static_cast<std::size_t>(i)],
                                           handles[static_cast<std::size_t>(j)]) != cu::kSuccess ||
                     can == 0)) {
        all = false;
      }
    }
    out.gpus[static_cast<std::size_t>(i)].p2p = all;
  }
  out.cuda_status = fmt::format("{} CUDA device{}, driver API {}.{}", count, count == 1 ? "" : "s",
                                version / 1000, (version % 1000) / 10);
  add_nvml_facts(out, bus_ids);
  return out;
}

}  // namespace tpcomm::probe
