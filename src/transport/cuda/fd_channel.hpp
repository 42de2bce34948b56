// Passing file descriptors (VMM workspace handles exported as POSIX fds) between the processes
// of one node over Unix sockets (SCM_RIGHTS). Every connection first proves itself to the
// listener (fd_channel_auth.hpp: the sender's credentials, and an HMAC with the group's key over
// the header it will send and the listener's nonce), and every message carries a framed header
// that the receiver checks (magic, version, communicator, sender, size), so a stranger's or a
// stale connection is refused, not mapped. Listeners use the abstract namespace: nothing is left
// in the file system, whatever happens to the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "control/socket_util.hpp"
#include "fd_channel_auth.hpp"
#include "fd_handle_header.hpp"
#include "tpcomm/deadline.hpp"

namespace tpcomm::transport::cuda {

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

// "tpcomm-fd-<comm>-<rank>": the start of a rank's listener name (listen_fd_channel adds 64
// random bits, so that nobody can take the name first).
std::string listener_name(std::uint64_t comm_id, int rank);
// Listens on `name` in the abstract namespace (non-blocking, a backlog of kListenBacklog).
net::Fd listen_abstract(const std::string& name);
// Connects to `name`, retrying while nobody listens there yet or its backlog is full, until the
// deadline (kTimeout naming it) or `stop`.
net::Fd connect_abstract(const std::string& name, const Deadline& deadline,
                         const std::atomic<bool>* stop = nullptr);
constexpr int kListenBacklog = 256;

// Every rank of `auth` sends its own descriptor to every other rank and receives theirs:
// result[p] is rank p's descriptor (result[rank] stays empty). `listener` (this rank's, as named
// in `auth`) must already be listening on every rank (a voted step before this one). Throws
// naming the rank that failed.
std::vector<net::Fd> exchange_handles(const FdChannelAuth& auth, int listener, int my_fd,
                                      std::uint64_t bytes, const Deadline& deadline);

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
  PendingPeers pending;  // connections accepted and not yet proven (a later round's among them)
};

// Every rank of `auth` sends all its descriptors of one round (`fds`, with the allocation size of
// each) to every other rank on one proven connection tagged `tag`, and receives theirs: result[p]
// is rank p's set (result[rank] stays empty). Each connection proves its header first
// (connect_peer / accept_peer), and every message of the set must carry that header, so a
// stranger's set is refused, never mapped. A fast peer's later round waits in `mailbox` (with the
// connections not yet proven), and a set of an earlier round is an error naming it. `listener`
// (this rank's, as named in `auth`) serves every round; every rank must pass the same number of
// descriptors.
std::vector<HandleSet> exchange_handle_sets(const FdChannelAuth& auth, std::uint32_t tag,
                                            int listener, HandleMailbox& mailbox,
                                            const std::vector<int>& fds,
                                            const std::vector<std::uint64_t>& sizes,
                                            const Deadline& deadline);

// Rank `root` sends `root_fd` to every other rank of `auth`, which returns it (root returns an
// empty Fd). `listener` must already be listening on every rank.
net::Fd broadcast_handle(const FdChannelAuth& auth, int root, int listener, int root_fd,
                         std::uint64_t bytes, const Deadline& deadline);

}  // namespace tpcomm::transport::cuda
