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

std::string reserve_failed(std::size_t bytes, int error, const std::string& workspace_hint) {
  return fmt::format(
      "shm: cannot reserve {} in /dev/shm: {}: enlarge /dev/shm (mount -o remount,size=2G "
      "/dev/shm, or docker run --shm-size=2g) or lower {}",
      mib(bytes), std::strerror(error), workspace_hint);
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
  close_fd();
  if (base_ != nullptr) munmap(base_, bytes_);
  unlink();
}

void Segment::map(int fd, std::size_t bytes) {
  // Not MAP_POPULATE: that would allocate every rank's range here, on this rank's node.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    throw Error(ErrorCode::kUnavailable, fmt::format("shm: cannot map /dev/shm{} ({}): {}", name_,
                                                     mib(bytes), std::strerror(errno)));
  }
  base_ = p;
  bytes_ = bytes;
  fd_ = fd;
}

void Segment::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Segment::create(const std::string& name, std::size_t bytes, std::size_t own_bytes,
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
  // The size without pages (tmpfs allocates none for ftruncate); then only our own range.
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    ::close(fd);
    unlink();
    throw Error(ErrorCode::kUnavailable, reserve_failed(bytes, error, workspace_hint));
  }
  if (int rc = posix_fallocate(fd, 0, static_cast<off_t>(own_bytes)); rc != 0) {
    ::close(fd);
    unlink();
    throw Error(ErrorCode::kUnavailable, reserve_failed(own_bytes, rc, workspace_hint));
  }
  try {
    map(fd, bytes);
  } catch (...) {
    ::close(fd);
    unlink();
    throw;
  }
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
    map(fd, bytes);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

// NOLINTNEXTLINE(readability-make-member-function-const): allocates the segment's pages
void Segment::reserve(std::size_t offset, std::size_t length, const std::string& workspace_hint) {
  if (int rc = posix_fallocate(fd_, static_cast<off_t>(offset), static_cast<off_t>(length));
      rc != 0) {
    throw Error(ErrorCode::kUnavailable, reserve_failed(length, rc, workspace_hint));
  }
}

void Segment::populate() {
  close_fd();
  if (base_ == nullptr) return;
  if (madvise(base_, bytes_, MADV_POPULATE_WRITE) == 0) return;
  // Kernels before 5.14: a read of each page maps it (every page is allocated by now).
  const long page = sysconf(_SC_PAGESIZE);
  const auto* bytes = static_cast<const volatile char*>(base_);
  for (std::size_t at = 0; at < bytes_; at += static_cast<std::size_t>(page)) (void)bytes[at];
}

void Segment::unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

}  // namespace tpcomm::transport::shm
