// Passing file descriptors (VMM workspace handles exported as POSIX fds) between the processes
// of one node over Unix sockets (SCM_RIGHTS). Every message carries a framed header that the
// receiver checks (magic, version, communicator, sender, size), so a stray or stale connection
// is an error naming what was wrong, not a wrong mapping. Listeners use the abstract namespace:
// nothing is left in the file system, whatever happens to the process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/socket_util.hpp"
#include "tpcomm/deadline.hpp"

namespace tpcomm::transport::cuda {

constexpr std::uint32_t kHandleMagic = 0x44465054;  // "TPFD"
constexpr std::uint16_t kHandleVersion = 1;

struct HandleHeader {
  std::uint32_t magic = kHandleMagic;
  std::uint16_t version = kHandleVersion;
  std::uint16_t kind = 0;  // what the fd is (0: custom workspace)
  std::int32_t from_rank = 0;
  std::int32_t reserved = 0;
  std::uint64_t comm_id = 0;
  std::uint64_t bytes = 0;  // the exported allocation's size
};
static_assert(sizeof(HandleHeader) == 32);

struct ReceivedHandle {
  HandleHeader header;
  net::Fd fd;
};

// Sends `header` and `fd` as one message. Throws kUnavailable on failure.
void send_handle(int socket, const HandleHeader& header, int fd, const Deadline& deadline);

// Receives one message and checks it: magic, version, comm_id == expected_comm and a descriptor
// attached. Throws kMismatch (wrong header) or kUnavailable (I/O) naming `from`.
ReceivedHandle receive_handle(int socket, std::uint64_t expected_comm, const Deadline& deadline,
                              const std::string& from);

// The listening socket of one rank: "\0tpcomm-fd-<comm>-<rank>" in the abstract namespace.
std::string listener_name(std::uint64_t comm_id, int rank);
net::Fd listen_abstract(const std::string& name);
net::Fd connect_abstract(const std::string& name, const Deadline& deadline);

// Every rank sends its own descriptor to every other rank and receives theirs: result[p] is
// rank p's descriptor (result[rank] stays empty). `listener` must already be listening on every
// rank (a voted step before this one). Throws naming the rank that failed.
std::vector<net::Fd> exchange_handles(int rank, int world, std::uint64_t comm_id, int listener,
                                      int my_fd, std::uint64_t bytes, const Deadline& deadline);

// Rank `root` sends `root_fd` to every other rank, which returns it (root returns an empty Fd).
// `listener` must already be listening on every rank.
net::Fd broadcast_handle(int rank, int world, int root, std::uint64_t comm_id, int listener,
                         int root_fd, std::uint64_t bytes, const Deadline& deadline);

}  // namespace tpcomm::transport::cuda
