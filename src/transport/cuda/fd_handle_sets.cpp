// Sets of descriptors, one tagged connection per pair of ranks and round, in messages of at most
// kMaxHandleSet descriptors each (fd_channel.hpp). Every connection proves its header with the
// group's key before its first message (connect_peer / accept_peer; docs/gpu-kernels.md, "Who may
// speak on the fd channel"), and every message of the set must repeat that header exactly.
//
// A set of any size travels as split_into_chunks() gives it: message i carries descriptors
// [first, first + count) in one SCM_RIGHTS control message, with their sizes after the header.
// The receiver reads a connection's messages until the set is whole (ChunkAssembly checks every
// index), so each read starts at a message boundary: a header-sized recvmsg takes the message's
// descriptors (the kernel attaches them to the first byte), then exactly `count` sizes follow.
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "fd_channel.hpp"
#include "handle_chunks.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::cuda {
namespace {

constexpr std::uint16_t kChunkedSetKind = 2;  // 1 was a set in one message (at most 200)

// What follows the header of each message, before its sizes.
struct ChunkWire {
  std::uint32_t index = 0;
  std::uint32_t chunks = 0;
  std::uint32_t first = 0;
  std::uint32_t count = 0;
};
static_assert(sizeof(ChunkWire) == 16);

// The fixed part of each message, read at once.
struct MessageStart {
  HandleHeader header;
  ChunkWire wire;
};
static_assert(sizeof(MessageStart) == sizeof(HandleHeader) + sizeof(ChunkWire));

std::string open_file_limit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return "unknown";
  return l.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(l.rlim_cur);
}

void send_chunk(int socket, const HandleHeader& header, const Chunk& c, const std::vector<int>& fds,
                const std::vector<std::uint64_t>& sizes, const Deadline& deadline) {
  HandleHeader h = header;
  ChunkWire w{c.index, c.chunks, c.first, c.count};
  iovec iov[3] = {{&h, sizeof(h)},
                  {&w, sizeof(w)},
                  {const_cast<std::uint64_t*>(sizes.data() + c.first), c.count * sizeof(sizes[0])}};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHandleSet)] = {};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 3;
  if (c.count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * c.count);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * c.count);
    std::memcpy(CMSG_DATA(cm), fds.data() + c.first, sizeof(int) * c.count);
  }
  const std::string what =
      fmt::format("sending buffer handles {}..{} of {} (message {} of {})", c.first,
                  c.first + c.count, header.bytes, c.index + 1, c.chunks);
  if (!wait_ready(socket, POLLOUT, deadline)) {
    throw Error(ErrorCode::kTimeout, fmt::format("{}: the peer took none in time", what));
  }
  const auto length = static_cast<ssize_t>(iov[0].iov_len + iov[1].iov_len + iov[2].iov_len);
  const ssize_t n = sendmsg(socket, &msg, MSG_NOSIGNAL);
  if (n < 0 && errno == ETOOMANYREFS) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("{}: too many descriptors in flight for this user; the kernel caps "
                            "them at the open-file limit (ulimit -n, now {}): raise it",
                            what, open_file_limit()));
  }
  if (n != length) {
    throw Error(ErrorCode::kUnavailable, fmt::format("{}: {}", what, net::errno_text()));
  }
}

// Reads exactly `bytes` (the rest of a message: no descriptors ride there).
void read_exact(int socket, void* to, std::size_t bytes, const Deadline& deadline) {
  auto* p = static_cast<char*>(to);
  while (bytes > 0) {
    if (!wait_ready(socket, POLLIN, deadline)) {
      throw Error(ErrorCode::kTimeout, "a peer's buffer handle message stopped halfway");
    }
    const ssize_t n = recv(socket, p, bytes, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("a peer's buffer handle message ended early: {}",
                              n == 0 ? "connection closed" : net::errno_text()));
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

struct ReceivedChunk {
  HandleHeader header;
  Chunk chunk;
  std::vector<net::Fd> fds;
  std::vector<std::uint64_t> sizes;
};

// The descriptors of one message, owned at once (every error path then closes them).
std::vector<net::Fd> take_descriptors(msghdr& msg) {
  std::vector<net::Fd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(fd);
    }
  }
  return fds;
}

void check_header(const HandleHeader& h, std::uint64_t comm_id) {
  if (h.magic != kHandleMagic || h.version != kHandleVersion || h.kind != kChunkedSetKind ||
      h.comm_id != comm_id) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("a buffer handle message that is not this communicator's (magic "
                            "{:#010x}, version {}, kind {}, communicator {:016x})",
                            h.magic, h.version, h.kind, h.comm_id));
  }
}

// One message of a set, its header checked against this communicator.
ReceivedChunk receive_chunk(int socket, std::uint64_t comm_id, const Deadline& deadline) {
  ReceivedChunk out;
  MessageStart start;
  iovec iov{&start, sizeof(start)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHandleSet)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (!wait_ready(socket, POLLIN, deadline)) {
    throw Error(ErrorCode::kTimeout, "a peer connected but sent no buffer handles in time");
  }
  const ssize_t n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  out.fds = take_descriptors(msg);
  if (n < 0) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("receiving buffer handles: {}", net::errno_text()));
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    throw Error(
        ErrorCode::kUnavailable,
        fmt::format("rank {}'s buffer handles (round {}): only {} of the message's "
                    "descriptors fit in this process (MSG_CTRUNC): its open-file limit "
                    "(ulimit -n, now {}) is too low for one descriptor per peer "
                    "allocation; raise it",
                    start.header.from_rank, start.header.tag, out.fds.size(), open_file_limit()));
  }
  if (n == 0) throw Error(ErrorCode::kUnavailable, "a peer closed before sending buffer handles");
  if (static_cast<std::size_t>(n) < sizeof(start)) {
    read_exact(socket, reinterpret_cast<char*>(&start) + n,
               sizeof(start) - static_cast<std::size_t>(n), deadline);
  }
  out.header = start.header;
  const ChunkWire& w = start.wire;
  check_header(out.header, comm_id);
  if (w.count > kMaxHandleSet || out.fds.size() != w.count) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("rank {}'s buffer handle message {} says {} descriptors and carries {}",
                            out.header.from_rank, w.index, w.count, out.fds.size()));
  }
  out.chunk = Chunk{w.index, w.chunks, w.first, w.count};
  out.sizes.resize(w.count);
  read_exact(socket, out.sizes.data(), w.count * sizeof(std::uint64_t), deadline);
  return out;
}

// A peer's whole set for one round from a connection that proved `proven` (a later round is
// returned for the mailbox; an earlier one is an error). Every message must carry the proven
// header: the proof covered it, not what a message says after it.
struct ReceivedSet {
  int from = -1;
  std::uint32_t tag = 0;
  HandleSet set;
};
ReceivedChunk receive_proven_chunk(int socket, const HandleHeader& proven,
                                   const Deadline& deadline) {
  ReceivedChunk c = receive_chunk(socket, proven.comm_id, deadline);
  require_proven(c.header, proven);
  return c;
}
ReceivedSet receive_set(int socket, const HandleHeader& proven, std::uint32_t tag,
                        const Deadline& deadline) {
  if (proven.kind != kChunkedSetKind) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("rank {} proved a message of kind {} where buffer handle sets (kind "
                            "{}) are exchanged",
                            proven.from_rank, proven.kind, kChunkedSetKind));
  }
  if (proven.tag < tag) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("rank {} sent {} buffer handles for round {}; this rank is in round {} "
                            "(a message of an earlier registration)",
                            proven.from_rank, proven.bytes, proven.tag, tag));
  }
  ChunkAssembly assembly(proven.from_rank, proven.tag, proven.bytes);
  while (!assembly.complete()) {
    ReceivedChunk next = receive_proven_chunk(socket, proven, deadline);
    assembly.add(next.chunk, std::move(next.fds), std::move(next.sizes));
  }
  return ReceivedSet{proven.from_rank, proven.tag, assembly.take()};
}

// This round's sets already in the mailbox (a fast peer's, received during an earlier round).
void take_from_mailbox(HandleMailbox& mailbox, std::uint32_t tag,
                       const std::function<void(int, HandleSet)>& take) {
  for (auto it = mailbox.early.begin(); it != mailbox.early.end();) {
    if (it->first.first != tag) {
      ++it;
      continue;
    }
    take(it->first.second, std::move(it->second));
    it = mailbox.early.erase(it);
  }
}

}  // namespace

std::vector<HandleSet> exchange_handle_sets(const FdChannelAuth& auth, std::uint32_t tag,
                                            int listener, HandleMailbox& mailbox,
                                            const std::vector<int>& fds,
                                            const std::vector<std::uint64_t>& sizes,
                                            const Deadline& deadline) {
  if (sizes.size() != fds.size() || fds.size() > kMaxRoundDescriptors) {
    throw Error(
        ErrorCode::kInvalidInput,
        fmt::format("{} buffer handles with {} sizes in one round", fds.size(), sizes.size()));
  }
  const int world = auth.world;
  std::vector<HandleSet> out(static_cast<std::size_t>(world));
  HandleHeader h;
  h.kind = kChunkedSetKind;
  h.from_rank = auth.rank;
  h.tag = tag;
  h.comm_id = auth.comm_id;
  h.bytes = fds.size();
  // A peer's whole set is one proven connection, so its messages never interleave with another's.
  // A sender waits for its peer's nonce, so the sends run beside the receives.
  const std::vector<Chunk> chunks = split_into_chunks(fds.size());
  auto send_all = [&](const std::atomic<bool>& stop) {
    for (int p = 0; p < world; ++p) {
      if (p == auth.rank) continue;
      net::Fd s = connect_peer(auth, p, h, deadline, &stop);
      for (const Chunk& c : chunks) send_chunk(s.get(), h, c, fds, sizes, deadline);
    }
  };
  std::vector<bool> seen(static_cast<std::size_t>(world), false);
  int got = 0;
  auto take = [&](int from, HandleSet set) {
    if (from < 0 || from >= world || from == auth.rank || seen[static_cast<std::size_t>(from)]) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("buffer handles claim to be from rank {} (world {}, twice or out of "
                              "range)",
                              from, world));
    }
    seen[static_cast<std::size_t>(from)] = true;
    out[static_cast<std::size_t>(from)] = std::move(set);
    ++got;
  };
  take_from_mailbox(mailbox, tag, take);
  auto receive_all = [&](const std::atomic<bool>& stop) {
    while (got < world - 1) {
      AcceptedPeer peer = accept_peer(
          listener, auth, mailbox.pending, deadline,
          fmt::format("{} of {} peers sent their buffer handles (round {})", got, world - 1, tag),
          &stop);
      ReceivedSet r = receive_set(peer.socket.get(), peer.header, tag, deadline);
      if (r.tag == tag) {
        take(r.from, std::move(r.set));
      } else {
        mailbox.early[{r.tag, r.from}] = std::move(r.set);  // a fast peer's later round
      }
    }
  };
  send_while_receiving(send_all, receive_all);
  return out;
}

}  // namespace tpcomm::transport::cuda
