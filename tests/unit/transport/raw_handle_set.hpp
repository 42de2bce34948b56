// One message of a handle set written by hand as the fd channel's wire has it
// (fd_handle_sets.cpp), for tests that play a peer's or a stranger's part: the header (kind 2, a
// chunked set), the chunk's index, chunk count, first descriptor and count, then the sizes, the
// descriptors attached.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "control/socket_util.hpp"
#include "transport/cuda/fd_handle_header.hpp"

namespace tpcomm::transport::cuda::test {

constexpr std::uint16_t kChunkedSetKind = 2;  // as fd_handle_sets.cpp

// The header of a whole set in one message.
inline HandleHeader set_header(std::uint64_t comm, int from_rank, std::uint32_t round,
                               std::size_t count) {
  HandleHeader h;
  h.kind = kChunkedSetKind;
  h.from_rank = from_rank;
  h.tag = round;
  h.comm_id = comm;
  h.bytes = count;
  return h;
}

// Sends `fds` (at most 8) with their `sizes` as the set's only message.
inline void send_raw_set(int socket, const HandleHeader& header, const std::vector<int>& fds,
                         const std::vector<std::uint64_t>& sizes) {
  ASSERT_LE(fds.size(), 8u);
  ASSERT_EQ(fds.size(), sizes.size());
  HandleHeader h = header;
  std::uint32_t wire[4] = {0, 1, 0, static_cast<std::uint32_t>(fds.size())};
  iovec iov[3] = {{&h, sizeof(h)},
                  {wire, sizeof(wire)},
                  {const_cast<std::uint64_t*>(sizes.data()), sizes.size() * sizeof(sizes[0])}};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)] = {};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 3;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
  }
  ASSERT_GT(sendmsg(socket, &msg, MSG_NOSIGNAL), 0) << net::errno_text();
}

}  // namespace tpcomm::transport::cuda::test
