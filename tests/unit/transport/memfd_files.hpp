// Descriptors of anonymous files with a known content, standing in for exported GPU memory in the
// fd channel's tests (a received descriptor is checked by what its file holds).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "control/socket_util.hpp"

namespace tpcomm::transport::cuda::test {

// A descriptor whose file holds `content`.
inline net::Fd file_with(const std::string& content) {
  net::Fd fd(memfd_create("tpcomm-test", MFD_CLOEXEC));
  EXPECT_GE(fd.get(), 0);
  EXPECT_EQ(write(fd.get(), content.data(), content.size()), static_cast<ssize_t>(content.size()));
  return fd;
}

// What the file behind `fd` holds (its first 128 bytes).
inline std::string content_of(int fd) {
  char buf[128];
  const ssize_t n = pread(fd, buf, sizeof(buf), 0);
  return n <= 0 ? "" : std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace tpcomm::transport::cuda::test
