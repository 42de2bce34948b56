// Segment lifecycle with clear errors.
#include "shm_segment.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport::shm {
namespace {

std::string mib(std::size_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

void* map(int fd, std::size_t bytes, const std::string& name) {
  // Populated now, at set-up, so that no call pays a page fault on its first touch of a lane.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    throw Error(ErrorCode::kUnavailable, fmt::format("shm: cannot map /dev/shm{} ({}): {}", name,
                                                     mib(bytes), std::strerror(errno)));
  }
  return p;
}

}  // namespace

std::string no_space_message(std::size_t needed, std::size_t free_bytes,
                             const std::string& workspace_hint) {
  // Exact bytes beside the rounded size: 1.0 MiB needed and 1.0 MiB free must not read alike.
  return fmt::format(
      "shm: the segment needs {} bytes ({}) in /dev/shm but only {} bytes ({}) are free: enlarge "
      "/dev/shm (mount -o remount,size=2G /dev/shm, or docker run --shm-size=2g) or lower {}",
      needed, mib(needed), free_bytes, mib(free_bytes), workspace_hint);
}

Segment::~Segment() {
  if (base_ != nullptr) munmap(base_, bytes_);
  unlink();
}

void Segment::create(const std::string& name, std::size_t bytes,
                     const std::string& workspace_hint) {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) == 0) {
    const std::size_t free_bytes = static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < bytes) {
      throw Error(ErrorCode::kUnavailable, no_space_message(bytes, free_bytes, workspace_hint));
    }
  }
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    // A segment of this name is left from a crashed run of a process with our pid: it cannot be
    // in use by anyone alive with this name, since the name also carries a fresh random id.
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  }
  if (fd < 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("shm: cannot create /dev/shm{}: {}", name, std::strerror(errno)));
  }
  name_ = name;
  linked_ = true;
  if (int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0) {
    ::close(fd);
    unlink();
    throw Error(ErrorCode::kUnavailable,
                fmt::format("shm: cannot reserve {} in /dev/shm: {}: enlarge /dev/shm (mount -o "
                            "remount,size=2G /dev/shm, or docker run --shm-size=2g) or lower {}",
                            mib(bytes), std::strerror(rc), workspace_hint));
  }
  try {
    base_ = map(fd, bytes, name);
  } catch (...) {
    ::close(fd);
    unlink();
    throw;
  }
  bytes_ = bytes;
  ::close(fd);
}

void Segment::open(const std::string& name, std::size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("shm: cannot open /dev/shm{}: {} (is this rank on the creator's node?)",
                            name, std::strerror(errno)));
  }
  name_ = name;
  try {
    base_ = map(fd, bytes, name);
  } catch (...) {
    ::close(fd);
    throw;
  }
  bytes_ = bytes;
  ::close(fd);
}

void Segment::unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

}  // namespace tpcomm::transport::shm
