// hwloc's topology (loaded once per process) for the nodes of a rank's CPUs; mbind through hwloc
// for the binding; move_pages through hwloc's memory location query for where pages are.
#include "numa_placement.hpp"

#include <hwloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>

#include <fmt/format.h>

namespace tpcomm::transport::cpu {
namespace {

// Loaded once: about a millisecond, and never changes under a running process.
hwloc_topology_t topology() {
  static hwloc_topology_t t = [] {
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) return static_cast<hwloc_topology_t>(nullptr);
    if (hwloc_topology_load(raw) != 0) {
      hwloc_topology_destroy(raw);
      return static_cast<hwloc_topology_t>(nullptr);
    }
    return raw;
  }();
  return t;
}

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

std::vector<int> indexes_of(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

}  // namespace

int numa_node_count() {
  hwloc_topology_t t = topology();
  if (t == nullptr) return 1;
  return std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE));
}

std::vector<int> nodes_of_this_rank() {
  hwloc_topology_t t = topology();
  if (t == nullptr) return {};
  Bitmap cpus(hwloc_bitmap_alloc());
  if (hwloc_get_cpubind(t, cpus.get(), HWLOC_CPUBIND_THREAD) != 0) return {};
  // Unbound: every CPU of the machine; first touch decides, as without tpcomm.
  if (hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(t), cpus.get())) return {};
  Bitmap nodes(hwloc_bitmap_alloc());
  hwloc_cpuset_to_nodeset(t, cpus.get(), nodes.get());
  return indexes_of(nodes.get());
}

std::string bind_pages(void* address, std::size_t bytes, const std::vector<int>& nodes) {
  hwloc_topology_t t = topology();
  if (t == nullptr) return "not bound: hwloc cannot read this machine's topology";
  if (nodes.empty()) return "not bound: the rank may run on every CPU (first touch places pages)";
  Bitmap set(hwloc_bitmap_alloc());
  for (int n : nodes) hwloc_bitmap_set(set.get(), static_cast<unsigned>(n));
  if (hwloc_set_area_membind(t, address, bytes, set.get(), HWLOC_MEMBIND_BIND,
                             HWLOC_MEMBIND_BYNODESET) != 0) {
    return fmt::format("not bound: mbind: {}", std::strerror(errno));
  }
  return fmt::format("bound to node {}", node_list_text(nodes));
}

std::vector<int> nodes_of_pages(const void* address, std::size_t bytes) {
  hwloc_topology_t t = topology();
  if (t == nullptr) return {};
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<int> out;
  Bitmap set(hwloc_bitmap_alloc());
  for (std::size_t at = 0; at < bytes; at += page) {
    hwloc_bitmap_zero(set.get());
    if (hwloc_get_area_memlocation(t, static_cast<const char*>(address) + at, page, set.get(),
                                   HWLOC_MEMBIND_BYNODESET) != 0) {
      return {};
    }
    out.push_back(hwloc_bitmap_iszero(set.get()) ? -1 : hwloc_bitmap_first(set.get()));
  }
  return out;
}

std::string node_list_text(const std::vector<int>& nodes) {
  return fmt::format("{}", fmt::join(nodes, ","));
}

NodeBuffer::~NodeBuffer() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

void NodeBuffer::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return;
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t rounded = (bytes + page - 1) / page * page;
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  bind_pages(p, rounded, nodes_of_this_rank());  // unbound or refused: first touch, as before
  if (data_ != nullptr) munmap(data_, bytes_);
  data_ = static_cast<std::uint8_t*>(p);
  bytes_ = rounded;
}

}  // namespace tpcomm::transport::cpu
