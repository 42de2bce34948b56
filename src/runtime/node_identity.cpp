// The shared-memory node probe.
#include "node_identity.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "common/segment_names.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::runtime {

NodeProbeSegment::NodeProbeSegment() {
  common::remove_stale_segments();
  std::random_device rd;
  const std::uint64_t a = (static_cast<std::uint64_t>(rd()) << 32) | rd();
  const std::uint64_t b = (static_cast<std::uint64_t>(rd()) << 32) | rd();
  name_ = common::segment_name("node", fmt::format("{:016x}", a));
  token_ = fmt::format("{:016x}{:016x}", a, b);
  int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("cannot create the node probe segment /dev/shm{}: {} (is /dev/shm "
                            "mounted and writable?)",
                            name_, std::strerror(errno)));
  }
  linked_ = true;
  const bool written =
      ::write(fd, token_.data(), token_.size()) == static_cast<ssize_t>(token_.size());
  ::close(fd);
  if (!written) {
    remove();
    throw Error(ErrorCode::kUnavailable, "cannot write the node probe segment in /dev/shm");
  }
}

NodeProbeSegment::~NodeProbeSegment() {
  remove();
}

void NodeProbeSegment::remove() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

bool can_see_segment(const std::string& name, const std::string& token) {
  int fd = shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  std::string got(token.size(), '\0');
  const bool ok =
      ::read(fd, got.data(), got.size()) == static_cast<ssize_t>(got.size()) && got == token;
  ::close(fd);
  return ok;
}

std::vector<int> group_nodes(const std::vector<std::vector<bool>>& sees) {
  const std::size_t n = sees.size();
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](std::size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      if (sees[i][j] && sees[j][i]) {
        auto a = find(i), b = find(j);
        if (a != b) parent[std::max(a, b)] = std::min(a, b);
      }
    }
  }
  std::vector<int> node(n, -1);
  int next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto root = find(i);
    if (node[root] < 0) node[root] = next++;
    node[i] = node[root];
  }
  return node;
}

}  // namespace tpcomm::runtime
