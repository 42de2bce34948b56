// Sets of descriptors in one tagged SCM_RIGHTS message per pair of ranks (fd_channel.hpp).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fd_channel.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport::cuda {
namespace {

constexpr std::uint16_t kSetKind = 1;

// Header, then one u64 size per descriptor; the descriptors ride in one control message.
struct SetMessage {
  HandleHeader header;
  std::uint64_t sizes[kMaxHandleSet];
  iovec iov{};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHandleSet)] = {};
  msghdr msg{};
  SetMessage() {
    iov = {this, sizeof(HandleHeader) + sizeof(sizes)};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  SetMessage(const SetMessage&) = delete;
  SetMessage& operator=(const SetMessage&) = delete;
};
static_assert(offsetof(SetMessage, sizes) == sizeof(HandleHeader));

void send_set(int socket, const HandleHeader& header, const std::vector<int>& fds,
              const std::vector<std::uint64_t>& sizes, const Deadline& deadline) {
  auto m = std::make_unique<SetMessage>();
  m->header = header;
  std::copy(sizes.begin(), sizes.end(), m->sizes);
  m->iov.iov_len = sizeof(HandleHeader) + sizes.size() * sizeof(std::uint64_t);
  if (fds.empty()) {
    m->msg.msg_control = nullptr;
    m->msg.msg_controllen = 0;
  } else {
    m->msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&m->msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  if (!wait_ready(socket, POLLOUT, deadline) ||
      sendmsg(socket, &m->msg, MSG_NOSIGNAL) != static_cast<ssize_t>(m->iov.iov_len)) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("sending {} buffer handles: {}", fds.size(), net::errno_text()));
  }
}

// One set from an accepted connection, checked against this communicator and round (a later
// round is returned for the mailbox; an earlier one is an error).
struct ReceivedSet {
  int from = -1;
  std::uint32_t tag = 0;
  HandleSet set;
};
ReceivedSet receive_set(int socket, std::uint64_t comm_id, std::uint32_t tag, std::size_t count,
                        const Deadline& deadline) {
  auto m = std::make_unique<SetMessage>();
  ReceivedSet out;
  if (!wait_ready(socket, POLLIN, deadline)) {
    throw Error(ErrorCode::kTimeout, "a peer connected but sent no buffer handles in time");
  }
  const ssize_t n = recvmsg(socket, &m->msg, MSG_CMSG_CLOEXEC);
  for (cmsghdr* c = CMSG_FIRSTHDR(&m->msg); c != nullptr; c = CMSG_NXTHDR(&m->msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      out.set.fds.emplace_back(fd);  // owned first, so every error path closes them
    }
  }
  const HandleHeader& h = m->header;
  const ssize_t expected =
      static_cast<ssize_t>(sizeof(HandleHeader) + count * sizeof(std::uint64_t));
  if (n < static_cast<ssize_t>(sizeof(HandleHeader)) || h.magic != kHandleMagic ||
      h.version != kHandleVersion || h.kind != kSetKind || h.comm_id != comm_id) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("a buffer handle message that is not this communicator's (magic "
                            "{:#010x}, version {}, kind {}, communicator {:016x})",
                            h.magic, h.version, h.kind, h.comm_id));
  }
  if (h.tag < tag || h.bytes != count || n != expected || out.set.fds.size() != count) {
    throw Error(ErrorCode::kMismatch,
                fmt::format("rank {} sent {} buffer handles ({} descriptors) for round {}; this "
                            "rank expected {} for round {}",
                            h.from_rank, h.bytes, out.set.fds.size(), h.tag, count, tag));
  }
  out.from = h.from_rank;
  out.tag = h.tag;
  out.set.sizes.assign(m->sizes, m->sizes + count);
  return out;
}

}  // namespace

std::vector<HandleSet> exchange_handle_sets(int rank, int world, std::uint64_t comm_id,
                                            std::uint32_t tag, int listener, HandleMailbox& mailbox,
                                            const std::vector<int>& fds,
                                            const std::vector<std::uint64_t>& sizes,
                                            const Deadline& deadline) {
  if (fds.size() > kMaxHandleSet || sizes.size() != fds.size()) {
    throw Error(ErrorCode::kInvalidInput, fmt::format("{} buffer handles in one round; at most {}",
                                                      fds.size(), kMaxHandleSet));
  }
  std::vector<HandleSet> out(static_cast<std::size_t>(world));
  HandleHeader h;
  h.kind = kSetKind;
  h.from_rank = rank;
  h.tag = tag;
  h.comm_id = comm_id;
  h.bytes = fds.size();
  // Connections are one-way (the sender connects), so sends never wait on this rank's receives.
  for (int p = 0; p < world; ++p) {
    if (p == rank) continue;
    net::Fd s = connect_abstract(listener_name(comm_id, p), deadline);
    send_set(s.get(), h, fds, sizes, deadline);
  }
  std::vector<bool> seen(static_cast<std::size_t>(world), false);
  int got = 0;
  auto take = [&](int from, HandleSet set) {
    if (from < 0 || from >= world || from == rank || seen[static_cast<std::size_t>(from)]) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("buffer handles claim to be from rank {} (world {}, twice or out of "
                              "range)",
                              from, world));
    }
    seen[static_cast<std::size_t>(from)] = true;
    out[static_cast<std::size_t>(from)] = std::move(set);
    ++got;
  };
  for (auto it = mailbox.early.begin(); it != mailbox.early.end();) {
    if (it->first.first != tag) {
      ++it;
      continue;
    }
    take(it->first.second, std::move(it->second));
    it = mailbox.early.erase(it);
  }
  while (got < world - 1) {
    if (!wait_ready(listener, POLLIN, deadline)) {
      throw Error(ErrorCode::kTimeout,
                  fmt::format("{} of {} peers sent their buffer handles (round {}) before the "
                              "deadline",
                              got, world - 1, tag));
    }
    net::Fd c(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (c.get() < 0) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("accepting buffer handles: {}", net::errno_text()));
    }
    ReceivedSet r = receive_set(c.get(), comm_id, tag, fds.size(), deadline);
    if (r.tag == tag) {
      take(r.from, std::move(r.set));
    } else {
      mailbox.early[{r.tag, r.from}] = std::move(r.set);  // a fast peer's later round
    }
  }
  return out;
}

}  // namespace tpcomm::transport::cuda
