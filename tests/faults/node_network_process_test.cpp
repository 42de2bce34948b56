// `tpcomm run --nodes K` with the node network (tools/sim_nodes/node_network.hpp): every node in
// a network namespace of its own, linked over a bridge; the store and the ranks' sockets on the
// links, a link rate and loss that still give correct results, and no namespace left behind, also
// when the launcher is killed. Each test skips, saying why, where the namespaces cannot be made.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "node_network_support.hpp"
#include "support/test_support.hpp"

namespace tpcomm {
namespace {

using namespace test::node_network;

const std::string kWorker = TPCOMM_WORKER;

// What each rank prints before and after 200 checked all-reduces (the worker's `random`): its node,
// the address it was given, its eth0's address, its network namespace, whether the store answers on
// its loopback, the bytes its eth0 received, the qdisc on eth0 and the loss rule.
constexpr const char* kRankScript = R"SH(
echo "node=$(hostname) socket=$TPCOMM_SOCKET_ADDRESS master=$MASTER_ADDR \
eth0=$(ip -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}') netns=$(readlink /proc/self/ns/net)"
if (exec 3<>/dev/tcp/127.0.0.1/$TPCOMM_STORE_PORT) 2>/dev/null; then echo loopback-store=reached
else echo loopback-store=refused; fi
"$1" random 200 "$0" || exit 1
echo "eth0-rx=$(awk -F'[: ]+' '/eth0:/{print $3}' /proc/net/dev)"
echo "qdisc=$(tc qdisc show dev eth0 2>/dev/null | grep -o 'tbf.*rate [^ ]*')"
echo "loss=$(nft list ruleset 2>/dev/null | grep -o 'numgen random mod 10000 < [0-9]*')"
)SH";

test::ProcessResult run_ranks(const std::vector<std::string>& run_args) {
  std::vector<std::string> argv = {TPCOMM_BIN, "run", "-n", "4", "--nodes", "2"};
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  for (const std::string a : {"--", "bash", "-c", kRankScript}) argv.push_back(a);
  argv.push_back(mark());
  argv.push_back(kWorker);
  return test::run_process(argv, {{"TPCOMM_DISABLE", ""}, {"TPCOMM_FAULT", ""}},
                           std::chrono::seconds(60));
}

TEST(NodeNetwork, EveryByteBetweenNodesCrossesTheirLinksAndNothingIsLeft) {
  if (auto why = why_not_here({"ip"}); !why.empty()) GTEST_SKIP() << why;
  auto r = run_ranks({"--node-network", "on"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto ranks = matches(r.out, std::regex(R"(\[(\d)\] node=sim-node-(\d) socket=(\S*) )"
                                               R"(master=(\S*) eth0=(\S*) netns=(\S*))"));
  ASSERT_EQ(ranks.size(), 4u) << r.out;
  const std::string own_namespace = network_namespaces()[std::to_string(getpid())];
  std::map<int, std::set<std::string>> namespaces_of_node;
  std::set<std::string> all;
  for (const auto& m : ranks) {
    const int node = std::stoi(m[2]);
    const std::string address = "198.18.0." + std::to_string(node + 1);
    EXPECT_EQ(node, std::stoi(m[1]) / 2) << r.out;
    EXPECT_EQ(m[3], address) << "TPCOMM_SOCKET_ADDRESS of rank " << m[1];
    EXPECT_EQ(m[4], "198.18.0.1") << "MASTER_ADDR: the store is on node 0's link";
    EXPECT_EQ(m[5], address + "/24") << "eth0 of rank " << m[1];
    EXPECT_NE(m[6], own_namespace) << "rank " << m[1] << " is in the host's network";
    namespaces_of_node[node].insert(m[6]);
    all.insert(m[6]);
  }
  EXPECT_EQ(all.size(), 2u) << "one network namespace per node\n" << r.out;
  EXPECT_EQ(namespaces_of_node[0].size(), 1u);
  // The store listens on node 0's link address only: no node reaches it on its own loopback.
  EXPECT_EQ(matches(r.out, std::regex("loopback-store=refused")).size(), 4u) << r.out;
  EXPECT_EQ(matches(r.out, std::regex("200 random calls, 0 failed")).size(), 4u) << r.out;
  // The all-reduces between the nodes went over eth0 (Gloo's connections, the store's).
  const auto received = matches(r.out, std::regex(R"(eth0-rx=(\d+))"));
  ASSERT_EQ(received.size(), 4u) << r.out;
  for (const auto& m : received) EXPECT_GT(std::stoll(m[1]), 100000) << r.out;
  EXPECT_TRUE(all_gone(all)) << "a node's network namespace outlived the run";
}

TEST(NodeNetwork, ALimitedLossyLinkStillGivesCorrectResults) {
  if (auto why = why_not_here({"ip", "tc", "nft"}); !why.empty()) GTEST_SKIP() << why;
  const auto started = std::chrono::steady_clock::now();
  auto r = run_ranks({"--link-rate", "100mbit", "--link-loss", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(matches(r.out, std::regex("200 random calls, 0 failed")).size(), 4u) << r.out;
  EXPECT_EQ(matches(r.out, std::regex("qdisc=tbf .*rate 100Mbit")).size(), 4u) << r.out;
  EXPECT_EQ(matches(r.out, std::regex("loss=numgen random mod 10000 < 100")).size(), 4u) << r.out;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
}

TEST(NodeNetwork, AKilledLauncherLeavesNoNamespace) {
  if (auto why = why_not_here({"ip"}); !why.empty()) GTEST_SKIP() << why;
  char dir[] = "/tmp/tpcomm_netnode_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string m = mark();
  const pid_t launcher =
      test::spawn({TPCOMM_BIN, "run", "-n", "2", "--nodes", "2", "--node-network", "on", "--",
                   "bash", "-c", std::string("echo up > ") + dir + "/$RANK; exec sleep 60", m});
  // Every holder (the nodes' and the hub's) is a fork of the launcher: its command line has `m`.
  std::set<std::string> made;
  for (int i = 0; i < 200; ++i) {
    struct stat st;
    if (stat((std::string(dir) + "/0").c_str(), &st) == 0 &&
        stat((std::string(dir) + "/1").c_str(), &st) == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const auto& [pid, ns] : network_namespaces(m)) made.insert(ns);
  made.erase(network_namespaces()[std::to_string(launcher)]);  // the host's
  EXPECT_EQ(made.size(), 3u) << "two nodes and the hub, each a namespace of its own";
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  EXPECT_TRUE(all_gone(made)) << processes_in(made) << " processes still hold them";
  for (const char* rank : {"/0", "/1"}) unlink((std::string(dir) + rank).c_str());
  rmdir(dir);
}

// `tpcomm bench --compare mpi --nodes 2`: mpirun in node 0 starts node 1's ranks through `tpcomm
// node-agent` in node 1's namespaces, so tpcomm plans hier_mpi (two nodes, bootstrapped through
// MPI) and both engines time the same calls over the links; the rows say which links; no mpirun
// daemon outlives the run, and an address that is no node's is refused by the agent.
TEST(NodeNetwork, BenchComparesWithOpenMpiAcrossTheNodesLinks) {
  if (auto why = why_not_here({"ip", "tc"}); !why.empty()) GTEST_SKIP() << why;
  if (!(TPCOMM_HAVE_MPI && access("/usr/bin/mpirun", X_OK) == 0))
    GTEST_SKIP() << "this build has no MPI or mpirun is missing: not run";
  const std::string tag = mark();
  const std::string json = "/tmp/tpcomm_mpi_nodes_" + tag + ".json";
  auto r = test::run_process(
      {TPCOMM_BIN, "bench", "-n",      "4",         "--nodes", "2",      "--link-rate",
       "1gbit",    "-b",    "4096",    "-e",        "65536",   "-f",     "16",
       "--iters",  "3",     "--check", "--compare", "mpi",     "--json", json},
      {{"ASAN_OPTIONS", "detect_leaks=0"}, {"TPCOMM_DISABLE", ""}, {"TPCOMM_TEST_MARK", tag}},
      std::chrono::seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("on 4 ranks (2 nodes, links of 1000 Mbit/s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  std::ifstream in(json);
  const std::string rows((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(json.c_str());
  EXPECT_EQ(matches(rows, std::regex(R"("backend_algorithm": "hier_mpi/hierarchical")")).size(), 2u)
      << "every node's ranks in that node's namespaces: " << rows;
  EXPECT_EQ(matches(rows, std::regex(R"("mpi_time_us": \d)")).size(), 2u) << rows;
  EXPECT_EQ(matches(rows, std::regex(R"("link_rate_bits": 1000000000)")).size(), 2u) << rows;
  EXPECT_EQ(matches(rows, std::regex(R"re("hier inter-node \(mpi\)": \d)re")).size(), 2u) << rows;
  EXPECT_TRUE(none_left_with_environment("TPCOMM_TEST_MARK=" + tag))
      << "an mpirun daemon outlived it";
  auto stranger = test::run_process({TPCOMM_BIN, "node-agent", "198.18.0.9", "true"},
                                    {{"TPCOMM_NODE_AGENT_MAP", "198.18.0.1=/proc/1/ns/uts"}});
  EXPECT_EQ(stranger.exit_code, 2);
  EXPECT_NE(stranger.err.find("198.18.0.9 is no simulated node's address"), std::string::npos)
      << stranger.err;
}

TEST(NodeNetwork, OptionsThatCannotBeHonouredAreRefused) {
  auto bad_rate = test::run_process(
      {TPCOMM_BIN, "run", "-n", "2", "--nodes", "2", "--link-rate", "100mbps", "--", "true"});
  EXPECT_EQ(bad_rate.exit_code, 2);
  EXPECT_NE(bad_rate.err.find("expected a rate from 8kbit to 1000gbit"), std::string::npos)
      << bad_rate.err;
  auto one_node =
      test::run_process({TPCOMM_BIN, "run", "-n", "2", "--link-loss", "1", "--", "true"});
  EXPECT_EQ(one_node.exit_code, 2);
  EXPECT_NE(one_node.err.find("--link-loss needs simulated nodes"), std::string::npos)
      << one_node.err;
  if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0)
    GTEST_SKIP() << "the rest runs the launcher as another user: needs root and setpriv";
  const std::vector<std::string> nobody = {"/usr/bin/setpriv",
                                           "--reuid=65534",
                                           "--regid=65534",
                                           "--clear-groups",
                                           TPCOMM_BIN,
                                           "run",
                                           "-n",
                                           "2",
                                           "--nodes",
                                           "2"};
  auto on = nobody;
  for (const char* a : {"--node-network", "on", "--", "true"}) on.push_back(a);
  auto refused = test::run_process(on);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--node-network on cannot be given: a network namespace per node "
                             "needs CAP_SYS_ADMIN and CAP_NET_ADMIN"),
            std::string::npos)
      << refused.err;
}

}  // namespace
}  // namespace tpcomm
