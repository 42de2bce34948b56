// The header every message of the fd channel (fd_channel.hpp) starts with, and that a connection
// proves before it sends the message (fd_channel_auth.hpp).
#pragma once

#include <cstdint>

namespace tpcomm::transport::cuda {

constexpr std::uint32_t kHandleMagic = 0x44465054;  // "TPFD"
// 2: handle sets (kind 1) with a round tag; 3: every connection proves its header first
constexpr std::uint16_t kHandleVersion = 3;

struct HandleHeader {
  std::uint32_t magic = kHandleMagic;
  std::uint16_t version = kHandleVersion;
  // 0: one workspace descriptor; 2: a set in messages of at most kMaxHandleSet descriptors
  // (exchange_handle_sets; 1, a set in one message, is no longer sent)
  std::uint16_t kind = 0;
  std::int32_t from_rank = 0;
  std::uint32_t tag = 0;  // a set's round: a message of another round is never taken for this one
  std::uint64_t comm_id = 0;
  std::uint64_t bytes =
      0;  // kind 0: the exported allocation's size; kind 2: descriptors in the set
};
static_assert(sizeof(HandleHeader) == 32);

}  // namespace tpcomm::transport::cuda
