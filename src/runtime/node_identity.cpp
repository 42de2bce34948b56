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

#include "tpcomm/error.hpp"
#include "tpcomm/log.hpp"

namespace tpcomm::runtime {

namespace {

// tpcomm segments (tpcomm-<kind>-<pid>-...) of processes that died long ago, killed before they
// could unlink them.
void remove_stale_segments() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  const auto now = std::chrono::system_clock::now();
  while (dirent* e = readdir(dir)) {
    int pid = 0;
    char kind[16] = {};
    if (std::sscanf(e->d_name, "tpcomm-%15[a-z]-%d-", kind, &pid) != 2 || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // its creator may still need it
    struct stat st {};
    const std::string path = std::string("/dev/shm/") + e->d_name;
    if (stat(path.c_str(), &st) != 0) continue;
    const auto age = now - std::chrono::system_clock::from_time_t(st.st_mtime);
    if (age < std::chrono::minutes(10)) continue;  // another PID namespace's, perhaps: leave it
    if (shm_unlink((std::string("/") + e->d_name).c_str()) == 0) {
      TPCOMM_LOG(kInfo, "comm", "removed /dev/shm/{} left by dead process {}", e->d_name, pid);
    }
  }
  closedir(dir);
}

}  // namespace

NodeProbeSegment::NodeProbeSegment() {
  remove_stale_segments();
  std::random_device rd;
  const std::uint64_t a = (static_cast<std::uint64_t>(rd()) << 32) | rd();
  const std::uint64_t b = (static_cast<std::uint64_t>(rd()) << 32) | rd();
  name_ = fmt::format("/tpcomm-node-{}-{:016x}", getpid(), a);
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
