// A network partition between two ranks on two hosts (network namespaces, addresses from
// 198.18.0.0/15; tests/support/net_namespaces.hpp): rank 0 serves the store in namespace 0, rank 1
// runs in namespace 1, and the link between them is cut silently, as a failed switch does.
// Every wait, store requests and the dial included, honours the communicator's deadline: each
// rank reports within the deadline plus a short bound, saying the store is unreachable and whom
// it did not hear from (it said so after 8 s, 64 s and 72 s with a 4 s deadline).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include "support/net_namespaces.hpp"
#include "support/test_support.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

constexpr long long kDeadlineMs = 4000;
// The report after a failed call (at most 1 s when the store cannot be reached), start-up, and a
// loaded machine or a sanitizer build (~0.4 s of margin at 1.5 s was too little).
constexpr long long kSlackMs = 3000;
constexpr const char* kPort = "29500";  // each test has namespaces of its own: never taken

// The two ranks, each in its namespace, their output in a file; whatever is still running at
// the end is killed (also when the test fails).
class PartitionedRanks {
 public:
  PartitionedRanks(test::NetNamespaces& net, const std::map<std::string, std::string>& env) {
    flag_ = "/tmp/tpcomm-partition-flag-" + std::to_string(getpid());
    unlink(flag_.c_str());
    for (int r = 0; r < 2; ++r) {
      std::map<std::string, std::string> e = env;
      e["RANK"] = std::to_string(r);
      e["WORLD_SIZE"] = "2";
      e["MASTER_ADDR"] = net.address(0);
      e["MASTER_PORT"] = kPort;
      e["TPCOMM_SOCKET_ADDRESS"] = net.address(r);
      e["TPCOMM_DISABLE"] = "shm";  // both namespaces share /dev/shm: the call goes over gloo
      for (const char* k : {"LOCAL_WORLD_SIZE", "TPCOMM_GROUP_ID", "TPCOMM_STORE_SECRET",
                            "TPCOMM_STORE_SECRET_FILE", "TPCOMM_STORE_PORT", "TPCOMM_FAULT",
                            "TPCOMM_CHECK", "TORCHELASTIC_RUN_ID"}) {
        e.emplace(k, "");
      }
      outs_.push_back("/tmp/tpcomm-partition-out-" + std::to_string(getpid()) + "-" +
                      std::to_string(r));
      pids_.push_back(
          test::spawn(net.inside(r, {TPCOMM_WORKER, "after_file", flag_}), e, outs_.back()));
    }
  }
  ~PartitionedRanks() {
    for (pid_t p : pids_) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    for (const auto& o : outs_) unlink(o.c_str());
    unlink(flag_.c_str());
  }
  // What rank r printed so far (nothing before it opened its output).
  std::string out(int r) const {
    std::ifstream in(outs_[static_cast<std::size_t>(r)]);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Waits until every rank's output has `part` (or it ended); false at the limit.
  bool wait_for_all(const std::string& part, std::chrono::seconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (int r = 0; r < 2; ++r) {
      while (out(r).find(part) == std::string::npos && running(r)) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(20ms);
      }
    }
    return true;
  }
  void release() { std::ofstream(flag_) << "go\n"; }

 private:
  bool running(int r) const { return kill(pids_[static_cast<std::size_t>(r)], 0) == 0; }
  std::string flag_;
  std::vector<pid_t> pids_;
  std::vector<std::string> outs_;
};

// The wall-clock ms on the line of `text` that contains `part` ("... at <ms>"), or -1.
long long time_of(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (line.find(part) != std::string::npos &&
        std::regex_search(line, m, std::regex(" at (\\d{10,})"))) {
      return std::stoll(m[1]);
    }
  }
  return -1;
}

// Both ranks are created, the link is cut, both call: each must fail within the deadline plus
// the report's bound, saying what it could and could not reach.
void cut_after_creation(const std::map<std::string, std::string>& env) {
  std::string why;
  auto net = test::NetNamespaces::create(2, &why);
  if (!net) GTEST_SKIP() << why;
  PartitionedRanks ranks(*net, env);
  ASSERT_TRUE(ranks.wait_for_all("created at", 30s)) << ranks.out(0) << ranks.out(1);
  for (int r = 0; r < 2; ++r) {
    ASSERT_NE(ranks.out(r).find(", 0 wrong"), std::string::npos) << "rank " << r << ranks.out(r);
  }
  ASSERT_TRUE(net->cut(0, 1));
  ranks.release();
  // Far beyond the bound, so that a rank that overruns it is seen overrunning, not hanging.
  ranks.wait_for_all("ERROR", 15s);
  for (int r = 0; r < 2; ++r) {
    const std::string out = ranks.out(r);
    const long long called = time_of(out, "calling at");
    const long long failed = time_of(out, "ERROR");
    ASSERT_GT(called, 0) << out;
    ASSERT_GT(failed, 0) << "rank " << r << " did not fail within 15 s of the cut: " << out;
    EXPECT_LE(failed - called, kDeadlineMs + kSlackMs) << "rank " << r << ": " << out;
    EXPECT_GE(failed - called, kDeadlineMs - 200) << "rank " << r << ": " << out;
  }
  // Rank 1 cannot reach the store (rank 0 serves it) and says so, naming whom it did not hear
  // from; rank 0 still reaches its own store and names rank 1 as the one it waited for.
  const std::string one = ranks.out(1);
  EXPECT_NE(one.find("the store, served by rank 0, is unreachable too: the store at " +
                     net->address(0) + ":" + kPort + " is unreachable within 1000 ms"),
            std::string::npos)
      << one;
  EXPECT_NE(one.find("not heard from: rank 0"), std::string::npos) << one;
  EXPECT_EQ(one.find("rank 0 is gone"), std::string::npos) << one;
  const std::string zero = ranks.out(0);
  EXPECT_NE(zero.find("rank 1 did not time out in call #2 as the others did"), std::string::npos)
      << zero;
  EXPECT_NE(zero.find("cut off from the store"), std::string::npos) << zero;
}

TEST(Partition, ACutAfterCreationEndsTheCallWithinTheEnvironmentsDeadline) {
  cut_after_creation({{"TPCOMM_TIMEOUT_MS", std::to_string(kDeadlineMs)}});
}

// The deadline of CommunicatorOptions::timeout (Python's timeout=) bounds the store's requests
// too, not the environment's default of 60 s.
TEST(Partition, ACutAfterCreationEndsTheCallWithinTheOptionsDeadline) {
  cut_after_creation({{"TPCOMM_TIMEOUT_MS", ""}, {"TEST_OPTION_TIMEOUT_MS", "4000"}});
}

// Cut before the ranks start: rank 1's dial of the store gets no answer at all (dropped SYNs),
// and must give up at the deadline, not at the kernel's connect timeout.
TEST(Partition, ACutBeforeCreationFailsTheDialWithinTheDeadline) {
  std::string why;
  auto net = test::NetNamespaces::create(2, &why);
  if (!net) GTEST_SKIP() << why;
  ASSERT_TRUE(net->cut(0, 1));
  PartitionedRanks ranks(*net, {{"TPCOMM_TIMEOUT_MS", std::to_string(kDeadlineMs)}});
  ranks.wait_for_all("ERROR", 15s);
  const std::string one = ranks.out(1);
  const long long started = time_of(one, "starting at");
  const long long failed = time_of(one, "ERROR");
  ASSERT_GT(started, 0) << one;
  ASSERT_GT(failed, 0) << "rank 1 did not fail within 15 s: " << one;
  EXPECT_LE(failed - started, kDeadlineMs + kSlackMs) << one;
  EXPECT_NE(
      one.find("cannot reach the store at " + net->address(0) + ":" + kPort + " within 4000 ms"),
      std::string::npos)
      << one;
  const std::string zero = ranks.out(0);
  EXPECT_NE(zero.find("rank 1 did not join within 4000 ms"), std::string::npos) << zero;
}

}  // namespace
}  // namespace tpcomm
