// tpcomm's /dev/shm segment names and the sweep of dead creators' segments (segment_names.hpp).
#include "segment_names.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "common/log_format.hpp"

namespace tpcomm::common {
namespace {

// A segment from another pid namespace may belong to a live process there: only this old.
constexpr auto kForeignAge = std::chrono::minutes(10);

}  // namespace

std::optional<unsigned long> own_pid_namespace() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return std::nullopt;
  return static_cast<unsigned long>(st.st_ino);
}

std::string segment_name(std::string_view kind, std::string_view unique) {
  return fmt::format("/tpcomm-{}-{}-n{}-{}", kind, getpid(), own_pid_namespace().value_or(0),
                     unique);
}

std::optional<SegmentOwner> segment_owner(std::string_view file_name) {
  const std::string name(file_name);
  char kind[16] = {};
  int pid = 0;
  int consumed = 0;
  if (std::sscanf(name.c_str(), "tpcomm-%15[a-z]-%d-%n", kind, &pid, &consumed) != 2 || pid <= 0 ||
      consumed == 0) {
    return std::nullopt;
  }
  SegmentOwner owner{kind, pid, std::nullopt};
  unsigned long ns = 0;
  if (std::sscanf(name.c_str() + consumed, "n%lu-", &ns) == 1 && ns != 0) owner.pid_namespace = ns;
  return owner;
}

int remove_stale_segments() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  const auto own_ns = own_pid_namespace();
  const auto now = std::chrono::system_clock::now();
  int removed = 0;
  while (dirent* e = readdir(dir)) {
    auto owner = segment_owner(e->d_name);
    if (!owner) continue;
    const bool same_namespace = owner->pid_namespace && owner->pid_namespace == own_ns;
    const bool alive = kill(owner->pid, 0) == 0 || errno != ESRCH;
    if (alive && same_namespace) continue;  // its creator lives: it may need it
    if (!same_namespace) {
      struct stat st {};
      const std::string path = std::string("/dev/shm/") + e->d_name;
      if (stat(path.c_str(), &st) != 0) continue;
      if (now - std::chrono::system_clock::from_time_t(st.st_mtime) < kForeignAge) continue;
    }
    if (shm_unlink((std::string("/") + e->d_name).c_str()) == 0) {
      ++removed;
      TPCOMM_LOG(kInfo, "comm", "removed /dev/shm/{} left by dead process {}", e->d_name,
                 owner->pid);
    }
  }
  closedir(dir);
  return removed;
}

}  // namespace tpcomm::common
