// The TCP store client shared by several threads (the world communicator, its splits and hier's
// node bootstraps share one connection), in a fork() child, against a store that stopped
// answering, and under a profiler-like signal storm.
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "control/socket_util.hpp"
#include "control/store_request_deadline.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Bytes b(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

struct Served {
  std::unique_ptr<TcpStoreServer> server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  std::shared_ptr<Store> connect() {
    return connect_tcp_store("127.0.0.1", server->port(), Deadline::after(5s));
  }
};

// One thread's request that waited past its deadline for the connection (another thread's wait
// held it) ends in kTimeout or succeeds, and the client keeps working: it used to send anyway,
// give up on the reply at once and mark the shared connection broken for good.
TEST(TcpStoreClientThreads, ARequestThatWaitedForTheConnectionLeavesTheClientWorking) {
  Served s;
  auto client = s.connect();
  auto waiter = std::async(std::launch::async,
                           [&] { return client->wait_for({"never"}, Deadline::after(1500ms)); });
  std::this_thread::sleep_for(100ms);  // the wait holds the connection by now
  try {
    const control::ScopedStoreDeadline bound(Deadline::after(300ms));
    EXPECT_FALSE(client->get("absent").has_value());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
  }
  EXPECT_EQ(waiter.get(), std::vector<std::string>{"never"});
  client->set("k", b("v"));
  EXPECT_EQ(client->get("k"), b("v"));
  EXPECT_TRUE(client->wait_for({"k"}, Deadline::after(1s)).empty());
}

// Two threads wait on one client for keys that arrive in the opposite order to their waits: the
// second wait returns as soon as its key is set, not after the first wait's deadline (two
// communicators' barriers that the ranks enter in different orders deadlocked until the timeout).
TEST(TcpStoreClientThreads, AWaitDoesNotHoldUpAnotherThreadsWaitOnTheSameClient) {
  Served s;
  auto client = s.connect();
  auto other = s.connect();
  auto first =
      std::async(std::launch::async, [&] { return client->wait_for({"a"}, Deadline::after(5s)); });
  std::this_thread::sleep_for(100ms);  // the first wait is at the store by now
  auto setter = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(100ms);
    other->set("b", b("1"));
  });
  const auto start = Clock::now();
  EXPECT_TRUE(client->wait_for({"b"}, Deadline::after(5s)).empty());
  const long long waited = ms_since(start);
  EXPECT_LT(waited, 1500) << "the second wait returned only after " << waited << " ms";
  setter.get();
  other->set("a", b("1"));
  EXPECT_TRUE(first.get().empty());
}

// A store process that stopped (SIGSTOP: its kernel still accepts the bytes, nothing answers),
// serving from a child process of the test.
class StoppedStore {
 public:
  StoppedStore() {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[0]);
      TcpStoreServer server("127.0.0.1", 0);
      const std::uint16_t port = server.port();
      [[maybe_unused]] auto n = write(fds[1], &port, sizeof(port));
      pause();
      _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &port_, sizeof(port_)) != sizeof(port_)) port_ = 0;
    close(fds[0]);
  }
  ~StoppedStore() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::uint16_t port() const { return port_; }
  void stop() { kill(pid_, SIGSTOP); }
  void resume() { kill(pid_, SIGCONT); }

 private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

// A wait whose store stopped answering ends at its deadline plus a small slack, not 2 s later.
TEST(TcpStoreClientDeadline, AWaitOnAStoreThatStoppedAnsweringEndsSoonAfterItsDeadline) {
  StoppedStore store;
  ASSERT_NE(store.port(), 0) << "the store's child process did not start";
  auto client = connect_tcp_store("127.0.0.1", store.port(), Deadline::after(5s));
  store.stop();
  const auto start = Clock::now();
  try {
    client->wait_for({"never"}, Deadline::after(1000ms));
    FAIL() << "a wait on a stopped store returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("is unreachable within 1000 ms"), std::string::npos)
        << e.what();
  }
  const long long waited = ms_since(start);
  EXPECT_GE(waited, 1000);
  EXPECT_LE(waited, 1000 + 600) << "the wait overran its deadline by " << waited - 1000 << " ms";
}

// A brief look whose answer comes late (a lost packet waits for TCP's retry; here the store is
// stopped for a second) is still a look: it returns the missing keys once the answer arrives,
// and the client keeps working. The store bootstrap's presence-watching looks once took a late
// answer for a lost store, and a 5% packet loss ended a run (CI, LinkFaults).
TEST(TcpStoreClientDeadline, ABriefLookWhoseAnswerComesLateIsNoLostStore) {
  StoppedStore store;
  ASSERT_NE(store.port(), 0) << "the store's child process did not start";
  auto client = connect_tcp_store("127.0.0.1", store.port(), Deadline::after(5s));
  client->set("there", b("1"));
  store.stop();
  auto resumer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(1000ms);
    store.resume();
  });
  const auto start = Clock::now();
  EXPECT_EQ(client->wait_briefly({"there", "never"}, 250ms, Deadline::after(5s)),
            std::vector<std::string>{"never"});
  const long long waited = ms_since(start);
  resumer.get();
  EXPECT_GE(waited, 1000) << "the answer came before the store was resumed";
  EXPECT_LE(waited, 2500) << "the look waited on after the late answer";
  client->set("after", b("2"));
  EXPECT_EQ(client->get("after"), b("2"));
}

// Waits up to `limit` for the child; its exit code, or -1 (killed at the limit).
int exit_code_within(pid_t child, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (Clock::now() > until) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A fork() child's copy of the client refuses requests naming fork() (it would write on the
// parent's connection), and destroying its copies of client and server leaves the parent's store
// serving: the server's stop signal and thread are the parent's.
TEST(TcpStoreFork, AChildsCopiesRefuseRequestsAndTheirDestructionLeavesTheParentsStoreServing) {
  Served s;
  auto client = s.connect();
  client->set("before", b("1"));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    try {
      client->get("before");
      code = 1;  // served: the child wrote on the parent's connection
    } catch (const Error& e) {
      const std::string what = e.what();
      if (e.code() != ErrorCode::kInvalidInput || what.find("fork()") == std::string::npos) {
        code = 2;
      }
    }
    client.reset();
    s.server.reset();
    _exit(code);
  }
  EXPECT_EQ(exit_code_within(child, 10s), 0)
      << "1: the child's request was served; 2: refused without naming fork(); -1: hung";
  client->set("after", b("2"));
  EXPECT_EQ(client->get("before"), b("1"));
  EXPECT_EQ(client->get("after"), b("2"));
  auto other = s.connect();
  auto setter = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(100ms);
    other->set("later", b("3"));
  });
  EXPECT_TRUE(client->wait_for({"later"}, Deadline::after(5s)).empty());
  setter.get();
}

// Rank 0 of a group that met by address, in a child process that hosts the store and ends once
// told to: the store goes with it.
class HostingRank {
 public:
  HostingRank() {
    int address_pipe[2];
    int stop_pipe[2];
    if (pipe(address_pipe) != 0 || pipe(stop_pipe) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(address_pipe[0]);
      close(stop_pipe[1]);  // else the stop pipe never ends for the child's read
      auto host = std::make_unique<StoreHost>("127.0.0.1");
      const std::string address = host->address();
      auto rank0 = bootstrap_from_address(address, 0, 2, Deadline::after(5s), std::move(host));
      [[maybe_unused]] auto n = write(address_pipe[1], address.data(), address.size());
      close(address_pipe[1]);
      char byte;
      [[maybe_unused]] auto m = read(stop_pipe[0], &byte, 1);
      _exit(0);  // the store ends with the process, as when rank 0 is killed
    }
    close(address_pipe[1]);
    close(stop_pipe[0]);
    stop_ = stop_pipe[1];
    char buf[512];
    for (ssize_t n; (n = read(address_pipe[0], buf, sizeof(buf))) > 0;) address_.append(buf, n);
    close(address_pipe[0]);
  }
  ~HostingRank() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  const std::string& address() const { return address_; }
  void end() {
    close(stop_);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int stop_ = -1;
  std::string address_;
};

// The store dies with the rank that served it before the group's first round: the survivor's
// error names that rank (it was unknown until a first round had succeeded).
TEST(StoreServedBy, AStoreLostInTheFirstRoundNamesTheRankThatServedIt) {
  HostingRank rank0;
  ASSERT_FALSE(rank0.address().empty()) << "rank 0's process did not start";
  auto rank1 = bootstrap_from_address(rank0.address(), 1, 2, Deadline::after(5s));
  rank0.end();
  try {
    rank1->all_gather(b("1"), "the first round", Deadline::after(3s));
    FAIL() << "a round without the store succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 served the store: rank 0 is gone"),
              std::string::npos)
        << e.what();
  }
}

// SIGALRM without SA_RESTART every 50 us at this thread while it dials the store and proves the
// secret, as a sampling profiler does: every connection succeeds (an interrupted connect() counted
// as a failed attempt, and creation failed).
TEST(TcpStoreSignals, DialsAndHandshakesSucceedUnderASignalEvery50Us) {
  sigset_t alarm;
  sigemptyset(&alarm);
  sigaddset(&alarm, SIGALRM);
  // The store's thread inherits the blocked signal: the storm hits the dialling thread.
  pthread_sigmask(SIG_BLOCK, &alarm, nullptr);
  TcpStoreServer server("127.0.0.1", 0, TcpStoreOptions{"secret", {}});
  struct sigaction action {};
  struct sigaction previous {};
  action.sa_handler = [](int) {};
  sigaction(SIGALRM, &action, &previous);  // no SA_RESTART: blocking calls see EINTR
  pthread_sigmask(SIG_UNBLOCK, &alarm, nullptr);
  itimerval storm{{0, 50}, {0, 50}};
  setitimer(ITIMER_REAL, &storm, nullptr);
  int failed = 0;
  std::string first_failure;
  for (int i = 0; i < 300; ++i) {
    std::string why;
    net::Fd fd = net::connect_tcp("127.0.0.1", server.port(), Deadline::after(2s), &why);
    if (fd.get() < 0 && failed++ == 0) first_failure = "connect_tcp: " + why;
    try {
      connect_tcp_store("127.0.0.1", server.port(), Deadline::after(2s), "secret")
          ->set("k", b("v"));
    } catch (const Error& e) {
      if (failed++ == 0) first_failure = e.what();
    }
  }
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  sigaction(SIGALRM, &previous, nullptr);
  EXPECT_EQ(failed, 0) << "first: " << first_failure;
}

}  // namespace
}  // namespace tpcomm
