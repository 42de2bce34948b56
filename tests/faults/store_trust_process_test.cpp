// The store under attack and misuse with real processes (docs/store.md, "Threat model"): two jobs
// on one MASTER_PORT, a rank with another secret, the address rank 0's store listens on, and a pile
// of idle connections against a standalone store.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "support/test_support.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

const std::string kWorker = TPCOMM_WORKER;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A port nothing listens on now.
std::uint16_t free_port() {
  TcpStoreServer probe("127.0.0.1", 0);
  return probe.port();
}

// test::spawn, with the group's identity and secret unset unless the test gives them.
pid_t start(const std::vector<std::string>& argv, std::map<std::string, std::string> env,
            const std::string& out_path) {
  for (const char* k : {"TPCOMM_STORE_SECRET", "TPCOMM_GROUP_ID", "TORCHELASTIC_RUN_ID"}) {
    env.emplace(k, "");
  }
  return test::spawn(argv, env, out_path);
}

// Exit status within `limit`, or -1 after killing it (the test fails).
int wait_exit(pid_t pid, std::chrono::seconds limit = 60s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "pid " << pid << " did not end within " << limit.count() << " s";
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits (bounded) until `path` contains `text`.
bool wait_for_text(const std::string& path, const std::string& text, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (read_all(path).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::map<std::string, std::string> rank_env(int rank, int size, std::uint16_t port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(size)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"TPCOMM_TIMEOUT_MS", "4000"}};
}

std::string out_path(const std::string& name) {
  return "/tmp/tpcomm-trust-" + std::to_string(getpid()) + "-" + name;
}

TEST(TwoJobs, ASecondJobOnTheSameMasterPortFailsSayingSoAndTheFirstRunsOn) {
  const std::uint16_t port = free_port();
  std::vector<pid_t> a;
  for (int r = 0; r < 2; ++r) {
    a.push_back(start({kWorker, "loop", "100000000", "1024"}, rank_env(r, 2, port),
                      out_path("a" + std::to_string(r))));
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(wait_for_text(out_path("a" + std::to_string(r)), "looping", 30s))
        << read_all(out_path("a" + std::to_string(r)));
  }
  std::vector<pid_t> b;
  for (int r = 0; r < 2; ++r) {
    b.push_back(
        start({kWorker, "correctness"}, rank_env(r, 2, port), out_path("b" + std::to_string(r))));
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(wait_exit(b[static_cast<std::size_t>(r)]), 3) << "kMismatch";
  }
  const std::string b0 = read_all(out_path("b0")), b1 = read_all(out_path("b1"));
  EXPECT_NE(b0.find("two groups met on the store at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << b0;
  EXPECT_NE(b1.find("rank 1 joined group"), std::string::npos) << b1;
  // Job A never noticed: still looping, no error; then it is stopped.
  for (int r = 0; r < 2; ++r) {
    const std::string text = read_all(out_path("a" + std::to_string(r)));
    EXPECT_EQ(text.find("ERROR"), std::string::npos) << text;
    kill(a[static_cast<std::size_t>(r)], SIGKILL);
    wait_exit(a[static_cast<std::size_t>(r)]);
  }
  for (const char* n : {"a0", "a1", "b0", "b1"}) unlink(out_path(n).c_str());
}

TEST(TwoJobs, NamedGroupsShareOneStandaloneStoreAtTheSameTime) {
  const std::uint16_t port = free_port();
  pid_t store = start({TPCOMM_BIN, "store", "--port", std::to_string(port)}, {}, out_path("s"));
  ASSERT_TRUE(wait_for_text(out_path("s"), "listening on", 20s)) << read_all(out_path("s"));
  std::vector<pid_t> ranks;
  for (const char* job : {"x", "y"}) {
    for (int r = 0; r < 2; ++r) {
      auto env = rank_env(r, 2, port);
      env["TPCOMM_GROUP_ID"] = job;
      ranks.push_back(start({kWorker, "correctness"}, env, out_path(job + std::to_string(r))));
    }
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    EXPECT_EQ(wait_exit(ranks[i]), 0)
        << read_all(out_path(std::string(i < 2 ? "x" : "y") + std::to_string(i % 2)));
  }
  kill(store, SIGINT);
  EXPECT_EQ(wait_exit(store), 0);
  for (const char* n : {"s", "x0", "x1", "y0", "y1"}) unlink(out_path(n).c_str());
}

TEST(StoreSecret, ARankWithAnotherSecretIsRefusedAndItsPeerNamesIt) {
  const std::uint16_t port = free_port();
  auto env0 = rank_env(0, 2, port), env1 = rank_env(1, 2, port);
  env0["TPCOMM_STORE_SECRET"] = "the-groups-secret";
  env1["TPCOMM_STORE_SECRET"] = "a-guess";
  pid_t r0 = start({kWorker, "create"}, env0, out_path("r0"));
  ASSERT_TRUE(wait_for_text(out_path("r0"), "", 1s));
  pid_t r1 = start({kWorker, "create"}, env1, out_path("r1"));
  EXPECT_EQ(wait_exit(r1), 1);
  EXPECT_EQ(wait_exit(r0), 1);
  const std::string o0 = read_all(out_path("r0")), o1 = read_all(out_path("r1"));
  EXPECT_NE(o1.find("authentication failed: the client's secret is not this store's"),
            std::string::npos)
      << o1;
  EXPECT_NE(o0.find("rank 1 did not join within 4000 ms"), std::string::npos) << o0;
  unlink(out_path("r0").c_str());
  unlink(out_path("r1").c_str());
}

// The listening address of `port` in /proc/net/tcp ("0100007F" is 127.0.0.1), or "".
std::string listening_address(std::uint16_t port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  const std::string wanted = fmt::format(":{:04X}", port);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() > 5 && local.substr(local.size() - 5) == wanted) {
      return local.substr(0, local.size() - 5);
    }
  }
  return "";
}

TEST(StoreBinding, RankZeroServesALoopbackMasterAddrOnLoopbackOnly) {
  const std::uint16_t port = free_port();
  pid_t r0 = start({kWorker, "create"}, rank_env(0, 2, port), out_path("bind"));
  std::string address;
  for (int i = 0; i < 1000 && address.empty(); ++i) {
    address = listening_address(port);
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(address, "0100007F") << "127.0.0.1, not every interface (00000000)";
  EXPECT_EQ(wait_exit(r0), 1) << "rank 1 never comes";
  unlink(out_path("bind").c_str());
}

// CPU seconds a process has used (user + system), from /proc/<pid>/stat.
double cpu_seconds(pid_t pid) {
  std::string stat = read_all("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;
  long user = 0, sys = 0;
  fields >> user >> sys;
  return static_cast<double>(user + sys) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

TEST(StoreLimitsUnderLoad, ElevenHundredIdleConnectionsNeitherStopAGroupNorSpinTheStore) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 4096);
  setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < 1200)
    GTEST_SKIP() << "needs 1200 descriptors; the hard limit is " << lim.rlim_max;
  const std::uint16_t port = free_port();
  pid_t store = start({TPCOMM_BIN, "store", "--port", std::to_string(port)}, {}, out_path("load"));
  ASSERT_TRUE(wait_for_text(out_path("load"), "listening on", 20s)) << read_all(out_path("load"));
  std::vector<int> idle;
  for (int i = 0; i < 1100; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    idle.push_back(fd);
  }
  const double cpu_before = cpu_seconds(store);
  std::vector<pid_t> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(start({kWorker, "correctness"}, rank_env(r, 2, port),
                          out_path("load" + std::to_string(r))));
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(wait_exit(ranks[static_cast<std::size_t>(r)]), 0)
        << read_all(out_path("load" + std::to_string(r)));
  }
  std::this_thread::sleep_for(1s);  // a spinning store would burn this second
  EXPECT_LT(cpu_seconds(store) - cpu_before, 0.9) << "the store busy-loops";
  for (int fd : idle) close(fd);
  kill(store, SIGINT);
  EXPECT_EQ(wait_exit(store), 0);
  const std::string log = read_all(out_path("load"));
  EXPECT_NE(log.find("connections are in their handshake; the oldest goes"), std::string::npos)
      << log.substr(0, 2000);
  for (const char* n : {"load", "load0", "load1"}) unlink(out_path(n).c_str());
}

}  // namespace
}  // namespace tpcomm

namespace tpcomm {
namespace {

TEST(CreationLimits, AHundredThousandRankGroupTimesOutWithinItsDeadline) {
  auto env = rank_env(0, 100000, free_port());
  env["TPCOMM_TIMEOUT_MS"] = "2000";
  const auto started = std::chrono::steady_clock::now();
  pid_t r0 = start({kWorker, "create"}, env, out_path("huge"));
  EXPECT_EQ(wait_exit(r0, 60s), 1);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string out = read_all(out_path("huge"));
  EXPECT_NE(out.find("ranks 1-99999 did not join within 2000 ms (facts exchange)"),
            std::string::npos)
      << out;
  EXPECT_LT(took, 12.0) << "a 2 s deadline took " << took << " s (it took 22.8 s before)";
  unlink(out_path("huge").c_str());
}

TEST(CreationLimits, ARankKilledDuringCreationIsNamedAtOnceNotAtTheDeadline) {
  const std::uint16_t port = free_port();
  std::vector<pid_t> ranks;
  for (int r = 0; r < 3; ++r) {
    auto env = rank_env(r, 3, port);
    env["TPCOMM_TIMEOUT_MS"] = "30000";
    env["TPCOMM_FAULT"] = "digest:stall@1";  // rank 1 stops after the facts exchange
    ranks.push_back(start({kWorker, "create"}, env, out_path("c" + std::to_string(r))));
  }
  std::this_thread::sleep_for(1500ms);
  kill(ranks[1], SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  for (int r : {0, 2}) {
    EXPECT_EQ(wait_exit(ranks[static_cast<std::size_t>(r)], 60s), 1);
    const std::string out = read_all(out_path("c" + std::to_string(r)));
    EXPECT_NE(out.find("rank 1 died during"), std::string::npos) << out;
  }
  wait_exit(ranks[1]);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count(), 15.0)
      << "the survivors waited for their 30 s deadline";
  for (const char* n : {"c0", "c1", "c2"}) unlink(out_path(n).c_str());
}

}  // namespace
}  // namespace tpcomm

namespace tpcomm {
namespace {

// tpcomm's segments in /dev/shm now.
std::set<std::string> segments() {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = e.path().filename();
    if (name.rfind("tpcomm-shm-", 0) == 0 || name.rfind("tpcomm-node-", 0) == 0) out.insert(name);
  }
  return out;
}

// kill -9 of `tpcomm run` while a rank sets up shm: its ranks die with it (PR_SET_PDEATHSIG)
// and cannot unlink what they created; the next tpcomm start on the machine removes it at once
// (it waited ten minutes before, not knowing whether the pid was of its own namespace).
TEST(VanishedLauncher, SegmentsOfRanksKilledWithTheirLauncherGoAtTheNextStart) {
  const auto before = segments();
  pid_t launcher = start({TPCOMM_BIN, "run", "-n", "2", "--", kWorker, "create"},
                         {{"TPCOMM_FAULT", "shm.map:stall@1"}, {"TPCOMM_TIMEOUT_MS", "30000"}},
                         out_path("vanish"));
  std::set<std::string> leaked;
  for (int i = 0; i < 2000 && leaked.empty(); ++i) {
    for (const auto& s : segments()) {
      if (before.count(s) == 0 && s.rfind("tpcomm-shm-", 0) == 0) leaked.insert(s);
    }
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_FALSE(leaked.empty()) << "no shm segment appeared: " << read_all(out_path("vanish"));
  kill(launcher, SIGKILL);
  wait_exit(launcher);
  // The creator (named in the segment) dies with its launcher.
  const int creator = std::stoi(leaked.begin()->substr(std::string("tpcomm-shm-").size()));
  for (int i = 0; i < 1000 && kill(creator, 0) == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_NE(kill(creator, 0), 0) << "the rank outlived its launcher";
  // Its creator was killed (above), so it could not unlink it. A tpcomm start of a test running
  // alongside this one may already have swept it: the same mechanism, sooner.
  if (!std::filesystem::exists("/dev/shm/" + *leaked.begin())) {
    std::cout << "[ info ] " << *leaked.begin() << " was already swept by another tpcomm start\n";
  }
  auto next = test::run_process({TPCOMM_BIN, "run", "-n", "2", "--", kWorker, "create"},
                                {{"TPCOMM_FAULT", ""}});
  EXPECT_EQ(next.exit_code, 0) << next.out << next.err;
  for (const auto& s : leaked) {
    EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + s)) << s << " was left behind";
  }
  unlink(out_path("vanish").c_str());
}

}  // namespace
}  // namespace tpcomm

namespace tpcomm {
namespace {

// Slurm's srun starts one task per rank with SLURM_PROCID / SLURM_NTASKS and the step's node
// list; the store runs on the list's first host, on a port derived from the job and step.
TEST(SlurmLaunch, TasksOfAnSrunStepFormAGroupFromSlurmsVariablesAlone) {
  int job = 1;
  for (; job < 20000; ++job) {  // a job id whose derived port is free now
    try {
      TcpStoreServer probe("127.0.0.1", static_cast<std::uint16_t>(20000 + (job * 16) % 12000));
      break;
    } catch (const Error&) {
    }
  }
  std::vector<pid_t> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(start({kWorker, "correctness"},
                          {{"SLURM_PROCID", std::to_string(r)},
                           {"SLURM_NTASKS", "2"},
                           {"SLURM_STEP_NUM_NODES", "1"},
                           {"SLURM_STEP_NODELIST", "localhost"},
                           {"SLURM_JOB_ID", std::to_string(job)},
                           {"SLURM_STEP_ID", "0"},
                           {"RANK", ""},
                           {"WORLD_SIZE", ""},
                           {"MASTER_ADDR", ""},
                           {"MASTER_PORT", ""},
                           {"TPCOMM_TIMEOUT_MS", "10000"}},
                          out_path("slurm" + std::to_string(r))));
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(wait_exit(ranks[static_cast<std::size_t>(r)]), 0)
        << read_all(out_path("slurm" + std::to_string(r)));
  }
  for (const char* n : {"slurm0", "slurm1"}) unlink(out_path(n).c_str());
}

}  // namespace
}  // namespace tpcomm
