// Where a rank's pages live, said explicitly (hwloc, Linux mbind): the shm slot a rank writes and
// its team's scratch are bound to the rank's NUMA node before their first page is allocated, so
// their place no longer depends on which thread touches a page first (a team worker running on
// another node, or a page first read by a peer). A rank bound to CPUs of one node gets that
// node; a rank bound across nodes gets the nodes of its CPUs; a rank that may run anywhere
// (unbound) gets no binding: the kernel's first-touch placement, as before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tpcomm::transport::cpu {

// The NUMA nodes of the calling thread's CPUs (OS indexes), ascending; empty when the rank may run
// on every CPU of the machine or the topology cannot be read.
std::vector<int> nodes_of_this_rank();

// Binds [address, address + bytes) (page-aligned) to `nodes` so that its pages are allocated
// there: a shared (tmpfs) mapping keeps the policy for the file's pages, whoever allocates them.
// Not strict: where the kernel has MPOL_PREFERRED_MANY (5.15+) hwloc asks for that, so a full
// node gives pages elsewhere instead of failing the allocation.
// Returns what it did, for the debug log ("bound to node 1", "not bound: ...").
std::string bind_pages(void* address, std::size_t bytes, const std::vector<int>& nodes);

// The node of every page of [address, address + bytes), -1 for a page not allocated; empty when
// the kernel cannot say.
std::vector<int> nodes_of_pages(const void* address, std::size_t bytes);

// Nodes of this machine, as hwloc counts them (1 on a machine without NUMA).
int numa_node_count();

// "0", "0,1": nodes as a list.
std::string node_list_text(const std::vector<int>& nodes);

// Anonymous memory bound to this rank's nodes (a team's scratch), grown on demand; its old
// contents are not kept when it grows.
class NodeBuffer {
 public:
  NodeBuffer() = default;
  ~NodeBuffer();
  NodeBuffer(const NodeBuffer&) = delete;
  NodeBuffer& operator=(const NodeBuffer&) = delete;
  // At least `bytes`, page-rounded.
  void reserve(std::size_t bytes);
  std::uint8_t* data() const { return data_; }

 private:
  std::uint8_t* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace tpcomm::transport::cpu
