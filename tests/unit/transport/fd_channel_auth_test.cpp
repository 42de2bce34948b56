// The fd channel against a local stranger (docs/gpu-kernels.md, "Who may speak on the fd channel"):
// two ranks (threads) exchange memfds over the real channel while a stranger - a thread of this
// process, a process of another uid, a flood of connections, a squatter on a rank's listener name -
// tries to slip its own descriptor in, to stall the exchange or to receive ours. The real
// descriptors must arrive (their content is checked), the stranger's never, and nothing may wait
// past its deadline.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "fd_channel_test_group.hpp"
#include "memfd_files.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/log.hpp"

namespace tpcomm::transport::cuda {
namespace {

using namespace test;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::uint64_t random_comm() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) | rd();
}

// A stranger's connection to an abstract name, with system calls only (it runs in forked
// children): the socket, or -1.
int raw_connect(const char* name, std::size_t length, bool nonblocking) {
  const int s = socket(AF_UNIX, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name, length);
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), len) == 0) return s;
  close(s);
  return -1;
}

// The header rank `from` would send, and the message with the stranger's descriptor.
HandleHeader forged_header(std::uint64_t comm, int from) {
  HandleHeader h;
  h.from_rank = from;
  h.comm_id = comm;
  h.bytes = 4096;
  return h;
}
bool send_forged(int s, const HandleHeader& header, int fd) {
  HandleHeader copy = header;
  iovec iov{&copy, sizeof(copy)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(s, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(copy));
}

// Ranks 0 and 1 exchange memfds holding "rank 0" and "rank 1". Past the deadline (and 5 s) the
// listeners are closed, so that a rank stuck in connect(2) ends too.
struct PairResult {
  std::string seen[2];
  std::string error[2];
  milliseconds took0{0};
};
PairResult exchange_pair(FdTestGroup& g, milliseconds budget) {
  PairResult out;
  std::vector<std::future<void>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      const auto start = std::chrono::steady_clock::now();
      net::Fd mine = file_with("rank " + std::to_string(r));
      try {
        auto fds = exchange_in(g, r, mine.get(), 4096, Deadline::after(budget));
        out.seen[r] = content_of(fds[static_cast<std::size_t>(1 - r)].get());
      } catch (const Error& e) {
        out.error[r] = e.what();
      }
      if (r == 0) {
        out.took0 =
            std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
      }
    }));
  }
  bool stuck = false;
  for (auto& f : ranks) stuck |= f.wait_for(budget + seconds(5)) != std::future_status::ready;
  if (stuck) g.close_listeners();
  for (auto& f : ranks) f.wait();
  return out;
}

void expect_real_exchange(const PairResult& r) {
  EXPECT_EQ(r.error[0], "");
  EXPECT_EQ(r.error[1], "");
  EXPECT_EQ(r.seen[0], "rank 1") << "rank 0 mapped somebody else's descriptor as rank 1's";
  EXPECT_EQ(r.seen[1], "rank 0");
}

// A forked stranger: `ready` carries one status byte from it, and it lives until `hold` closes
// (or 30 s), so that its connections stay open through the exchange.
struct Stranger {
  pid_t pid = -1;
  int ready[2] = {-1, -1};
  int hold[2] = {-1, -1};
  template <typename Body>
  explicit Stranger(Body body) {
    EXPECT_EQ(pipe2(ready, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(hold, O_CLOEXEC), 0);
    pid = fork();
    if (pid == 0) {
      alarm(30);
      close(hold[1]);
      const char status = body();
      if (write(ready[1], &status, 1) != 1) _exit(2);
      char c;
      while (read(hold[0], &c, 1) > 0) {
      }
      _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
  }
  // The child's status byte, or '?' when none came within `wait`.
  char status(milliseconds wait = milliseconds(10000)) const {
    pollfd p{ready[0], POLLIN, 0};
    char c = '?';
    if (poll(&p, 1, static_cast<int>(wait.count())) == 1 && read(ready[0], &c, 1) != 1) c = '?';
    return c;
  }
  ~Stranger() {
    close(hold[1]);
    close(ready[0]);
    if (pid > 0) {
      int st;
      waitpid(pid, &st, 0);
    }
  }
};

struct LogCapture {
  std::mutex m;
  std::string lines;
  LogCapture() {
    set_log_sink([this](LogLevel, std::string_view, std::string_view line) {
      std::lock_guard<std::mutex> lock(m);
      lines += std::string(line) + "\n";
    });
  }
  ~LogCapture() { set_log_sink({}); }
  std::string text() {
    std::lock_guard<std::mutex> lock(m);
    return lines;
  }
};

TEST(FdChannelStrangers, AForgedMessageFromAStrangerThatConnectsFirstIsNotTaken) {
  auto g = make_fd_test_group(2, random_comm());
  net::Fd attacker = file_with("attacker");
  const std::string& name = g.listener_name(0);
  net::Fd s(raw_connect(name.data(), name.size(), false));
  ASSERT_GE(s.get(), 0);
  ASSERT_TRUE(send_forged(s.get(), forged_header(g.comm, 1), attacker.get()));
  expect_real_exchange(exchange_pair(g, seconds(5)));
}

// A stranger who knows the protocol but not the key: a proof frame for rank 1's header with a
// guessed MAC, then the message.
TEST(FdChannelStrangers, AProofMadeWithoutTheGroupsKeyIsRefused) {
  auto g = make_fd_test_group(2, random_comm());
  net::Fd attacker = file_with("attacker");
  const std::string& name = g.listener_name(0);
  net::Fd s(raw_connect(name.data(), name.size(), false));
  ASSERT_GE(s.get(), 0);
  struct {
    HandleHeader header;
    std::int32_t to_rank = 0;
    std::uint32_t reserved = 0;
    std::uint8_t mac[32];
  } proof{forged_header(g.comm, 1), 0, 0, {}};
  std::memset(proof.mac, 0xa5, sizeof(proof.mac));
  ASSERT_EQ(write(s.get(), &proof, sizeof(proof)), static_cast<ssize_t>(sizeof(proof)));
  ASSERT_TRUE(send_forged(s.get(), forged_header(g.comm, 1), attacker.get()));
  expect_real_exchange(exchange_pair(g, seconds(5)));
}

TEST(FdChannelStrangers, TheRootsDescriptorArrivesPastAForgedOne) {
  auto g = make_fd_test_group(2, random_comm());
  net::Fd attacker = file_with("attacker");
  const std::string& name = g.listener_name(1);
  net::Fd s(raw_connect(name.data(), name.size(), false));
  ASSERT_GE(s.get(), 0);
  ASSERT_TRUE(send_forged(s.get(), forged_header(g.comm, 0), attacker.get()));
  net::Fd root = file_with("multicast of rank 0");
  std::thread root_rank([&] {
    try {
      broadcast_in(g, 0, 0, root.get(), 4096, Deadline::after(seconds(5)));
    } catch (const Error&) {
    }
  });
  std::string got;
  try {
    net::Fd fd = broadcast_in(g, 1, 0, -1, 4096, Deadline::after(seconds(5)));
    got = content_of(fd.get());
  } catch (const Error& e) {
    got = e.what();
  }
  root_rank.join();
  EXPECT_EQ(got, "multicast of rank 0");
}

// SO_PEERCRED: a process of another user (nobody) is refused before it is even asked for a proof.
TEST(FdChannelStrangers, AStrangerOfAnotherUidIsRefusedByItsCredentials) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to fork a stranger that setuid()s to nobody";
  auto g = make_fd_test_group(2, random_comm());
  const std::string name = g.listener_name(0);
  const std::uint64_t comm = g.comm;
  LogCapture log;
  Stranger nobody([&]() -> char {
    if (setgid(65534) != 0 || setuid(65534) != 0) return 'U';
    const int f = memfd_create("attacker", 0);
    if (f < 0 || write(f, "attacker", 8) != 8) return 'M';
    const int s = raw_connect(name.data(), name.size(), false);
    if (s < 0) return 'C';
    return send_forged(s, forged_header(comm, 1), f) ? 'R' : 'S';
  });
  ASSERT_EQ(nobody.status(), 'R') << "the stranger did not connect and send (U: setuid failed)";
  expect_real_exchange(exchange_pair(g, seconds(5)));
  EXPECT_NE(log.text().find("uid 65534 is not this rank's"), std::string::npos) << log.text();
}

// A connection that sends nothing waits beside the others: the real peer is taken at once, not
// after the stranger's proof window (nor at the exchange's deadline).
TEST(FdChannelStrangers, ASilentStrangerDoesNotHoldUpTheRealPeer) {
  auto g = make_fd_test_group(2, random_comm());
  const std::string& name = g.listener_name(0);
  net::Fd silent(raw_connect(name.data(), name.size(), false));
  ASSERT_GE(silent.get(), 0);
  const PairResult r = exchange_pair(g, seconds(10));
  expect_real_exchange(r);
  EXPECT_LT(r.took0, kProofWindow) << "the real peer waited behind the silent stranger";
}

// A process of our uid floods rank 0's listener past its backlog, and keeps refilling it while
// the ranks exchange: each of its connections is refused by pid, and set-up completes.
TEST(FdChannelStrangers, AFloodOfStrangerConnectionsDoesNotFailTheExchange) {
  auto g = make_fd_test_group(2, random_comm());
  const std::string name = g.listener_name(0);
  Stranger flood([&]() -> char {
    constexpr int kConnections = 600;
    timespec start{}, now{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    bool full = false;
    for (int held = 0; held < kConnections;) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec > 3) break;
      if (raw_connect(name.data(), name.size(), true) >= 0) {
        ++held;
        continue;
      }
      full = true;  // refused: the backlog is full (the listener keeps draining it)
      usleep(200);
    }
    return full ? 'F' : 'N';
  });
  // The stranger reports at the end of its flood; the exchange runs while it floods.
  std::this_thread::sleep_for(milliseconds(300));
  const PairResult r = exchange_pair(g, seconds(10));
  EXPECT_EQ(flood.status(), 'F') << "the stranger never filled the backlog";
  expect_real_exchange(r);
}

// A process that holds the name a rank announced never gets a descriptor: the sender checks the
// listener's credentials before it sends anything.
TEST(FdChannelStrangers, ASquatterOnARanksListenerNameReceivesNothing) {
  const std::uint64_t comm = random_comm();
  const std::string name = listener_name(comm, 1);
  Stranger squatter([&]() -> char {
    const int l = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (bind(l, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(l, 16) != 0) return 'B';
    for (int round = 0; round < 40; ++round) {  // 4 s
      pollfd p{l, POLLIN, 0};
      if (poll(&p, 1, 100) != 1) continue;
      const int c = accept(l, nullptr, nullptr);
      for (int k = 0; k < 20; ++k) {
        char data[128];
        iovec iov{data, sizeof(data)};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = control;
        m.msg_controllen = sizeof(control);
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 100) != 1) continue;
        if (recvmsg(c, &m, 0) <= 0) break;
        if (CMSG_FIRSTHDR(&m) != nullptr) return 'Y';
      }
      close(c);
    }
    return 'N';
  });
  // Give the squatter its name first (it is a separate process: no way to ask but to try).
  for (int i = 0; i < 100; ++i) {
    const int probe = raw_connect(name.data(), name.size(), false);
    if (probe >= 0) {
      close(probe);
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  auto g = make_fd_test_group(2, comm, 1, name);
  net::Fd mine = file_with("rank 0");
  std::string error;
  try {
    exchange_in(g, 0, mine.get(), 4096, Deadline::after(seconds(2)));
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(squatter.status(), 'N') << "the squatter received rank 0's descriptor";
  EXPECT_NE(error.find("belongs to another process"), std::string::npos) << error;
}

// What a proof binds: a proof holds for one nonce, one receiving rank, one header (every field of
// it) and the group's key; the ranks agreed on one key, and another group has another.
TEST(FdChannelProofs, AProofHoldsForItsNonceReceiverHeaderAndKeyOnly) {
  auto g = make_fd_test_group(2, random_comm());
  const FdChannelAuth& a = g.auth[1];
  ASSERT_EQ(a.key.size(), 32u);
  EXPECT_EQ(a.key, g.auth[0].key) << "the ranks derived different keys";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(a.peers[static_cast<std::size_t>(r)].pid, getpid());
    EXPECT_EQ(a.peers[static_cast<std::size_t>(r)].listener, g.listener_name(r));
  }
  ProofNonce nonce{};
  nonce[0] = 1;
  HandleHeader h = forged_header(g.comm, 1);
  h.kind = 2;
  h.tag = 7;
  const Bytes proof = header_proof(a, nonce, 0, h);
  EXPECT_EQ(proof, header_proof(g.auth[0], nonce, 0, h));
  ProofNonce other = nonce;
  other[31] ^= 1;
  EXPECT_NE(proof, header_proof(a, other, 0, h)) << "a proof replayed under another nonce held";
  EXPECT_NE(proof, header_proof(a, nonce, 1, h)) << "a proof for another receiver held";
  std::vector<HandleHeader> changed(7, h);
  changed[0].magic ^= 1;
  changed[1].version ^= 1;
  changed[2].kind ^= 1;
  changed[3].from_rank ^= 1;
  changed[4].tag ^= 1;
  changed[5].comm_id ^= 1;
  changed[6].bytes ^= 1;
  for (std::size_t i = 0; i < changed.size(); ++i) {
    EXPECT_NE(proof, header_proof(a, nonce, 0, changed[i])) << "header field " << i;
  }
  FdChannelAuth wrong = a;
  wrong.key[0] ^= 1;
  EXPECT_NE(proof, header_proof(wrong, nonce, 0, h));
  auto second = make_fd_test_group(2, g.comm);
  EXPECT_NE(second.auth[0].key, a.key) << "two communicators of one id share a key";
}

}  // namespace
}  // namespace tpcomm::transport::cuda
