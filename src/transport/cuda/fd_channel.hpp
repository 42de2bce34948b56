// Passing file descriptors (VMM workspace handles exported as POSIX fds) between the processes
// of one node over Unix sockets (SCM_RIGHTS). Every message carries a framed header that the
// receiver checks (magic, version, communicator, sender, size), so a stray or stale connection
// is an error naming what was wrong, not a wrong mapping. Listeners use the abstract namespace:
// nothing is left in the file system, whatever happens to the process.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "control/socket_util.hpp"
#include "tpcomm/deadline.hpp"

namespace tpcomm::transport::cuda {

constexpr std::uint32_t kHandleMagic = 0x44465054;  // "TPFD"
constexpr std::uint16_t kHandleVersion = 2;         // 2: handle sets (kind 1) with a round tag

struct HandleHeader {
  std::uint32_t magic = kHandleMagic;
  std::uint16_t version = kHandleVersion;
  std::uint16_t kind = 0;  // 0: one workspace descriptor; 1: a set (exchange_handle_sets)
  std::int32_t from_rank = 0;
  std::uint32_t tag = 0;  // a set's round: a message of another round is never taken for this one
  std::uint64_t comm_id = 0;
  std::uint64_t bytes =
      0;  // kind 0: the exported allocation's size; kind 1: descriptors in the set
};
static_assert(sizeof(HandleHeader) == 32);

struct ReceivedHandle {
  HandleHeader header;
  net::Fd fd;
};

// Waits until `fd` is readable or writable (poll `events`); false when the deadline passed.
bool wait_ready(int fd, short events, const Deadline& deadline);

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

// At most this many descriptors travel in one set (one SCM_RIGHTS message).
constexpr std::size_t kMaxHandleSet = 200;

// One rank's set of one round: its descriptors and their allocation sizes.
struct HandleSet {
  std::vector<net::Fd> fds;
  std::vector<std::uint64_t> sizes;
};
// Sets that arrived for a later round than the one being received (a fast peer), kept until
// their round: one per listener, living as long as it.
struct HandleMailbox {
  std::map<std::pair<std::uint32_t, int>, HandleSet> early;  // (tag, from rank) -> set
};

// Every rank sends all its descriptors of one round (`fds`, with the allocation size of each) to
// every other rank in one message tagged `tag`, and receives theirs: result[p] is rank p's set
// (result[rank] stays empty). One message per pair and round; a fast peer's later round waits in
// `mailbox`, and a message of an earlier round, another communicator or another count is an
// error naming it. Every rank must pass the same number of descriptors.
std::vector<HandleSet> exchange_handle_sets(int rank, int world, std::uint64_t comm_id,
                                            std::uint32_t tag, int listener, HandleMailbox& mailbox,
                                            const std::vector<int>& fds,
                                            const std::vector<std::uint64_t>& sizes,
                                            const Deadline& deadline);

// Rank `root` sends `root_fd` to every other rank, which returns it (root returns an empty Fd).
// `listener` must already be listening on every rank.
net::Fd broadcast_handle(int rank, int world, int root, std::uint64_t comm_id, int listener,
                         int root_fd, std::uint64_t bytes, const Deadline& deadline);

}  // namespace tpcomm::transport::cuda
