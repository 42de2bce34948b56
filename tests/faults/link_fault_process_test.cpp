// Faults across the node network (docs/errors.md, "In a running group"): a node's link cut silently
// (a partition, nftables) or set down at the bridge in the middle of hier and Gloo calls, W = 4 on
// 2 nodes and W = 6 on 3. Every rank must end within its deadline with an error naming a rank
// across the cut, none may have returned wrong data as success, and nothing is left: no process of
// the run, no namespace (the nodes' /dev/shm are private mounts that end with them). Random loss
// must not be an error at all: TCP retransmits. Each test skips, saying why, where the namespaces
// cannot be made.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "node_network_support.hpp"
#include "support/test_support.hpp"

namespace tpcomm {
namespace {

using namespace test::node_network;

constexpr long long kDeadlineMs = 3000;
// Reporting after the deadline (asking the store who else failed: at most 1 s when it is
// unreachable) and a loaded machine or a sanitizer build.
constexpr long long kSlackMs = 3000;

struct Group {
  int ranks;
  int nodes;
  int node_of(int rank) const { return rank / (ranks / nodes); }
};

// `tpcomm run` of the worker's until_lost (`calls` checked calls) on `group`, with `fault` (e.g.
// "--link-cut", "1@2") and the environment `env` added.
test::ProcessResult run_until_lost(const Group& group, const std::vector<std::string>& fault,
                                   const std::map<std::string, std::string>& env,
                                   const std::string& calls, const std::string& m) {
  std::vector<std::string> argv = {TPCOMM_BIN,    "run",
                                   "-n",          std::to_string(group.ranks),
                                   "--nodes",     std::to_string(group.nodes),
                                   "--keep-going"};
  argv.insert(argv.end(), fault.begin(), fault.end());
  for (const std::string a : {"--", TPCOMM_WORKER, "until_lost"}) argv.push_back(a);
  argv.push_back(calls);
  argv.push_back(m);
  std::map<std::string, std::string> e = {{"TPCOMM_TIMEOUT_MS", std::to_string(kDeadlineMs)},
                                          {"TPCOMM_FAULT", ""},
                                          {"TPCOMM_DISABLE", ""}};
  for (const auto& [k, v] : env) e[k] = v;
  return test::run_process(argv, e, std::chrono::seconds(60));
}

// Whether `text` names a rank for which `across` holds: "rank 3", "ranks 0, 1", "ranks 2-5".
bool names_a_rank(const std::string& text, const std::function<bool(int)>& across) {
  for (const auto& m : matches(text, std::regex(R"(\branks? ((\d+(-\d+)?)(, \d+(-\d+)?)*))"))) {
    const std::string list = m[1].str();  // the matches below point into it
    for (const auto& item : matches(list, std::regex(R"((\d+)(-(\d+))?)"))) {
      const int first = std::stoi(item[1]);
      const int last = item[3].matched ? std::stoi(item[3]) : first;
      for (int r = first; r <= last; ++r)
        if (across(r)) return true;
    }
  }
  return false;
}

// The cut of `cut_node` (`option` = --link-cut or --link-down) 2 s into the calls of `group`.
void cut_during_calls(const Group& group, const std::string& option, int cut_node,
                      const std::map<std::string, std::string>& env) {
  if (auto why = why_not_here({"ip", "nft"}); !why.empty()) GTEST_SKIP() << why;
  const std::string m = mark();
  // More calls than 2 s hold (about 150 here): the cut comes first.
  auto r = run_until_lost(group, {option, std::to_string(cut_node) + "@2"}, env, "1000000", m);
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  const auto cut =
      matches(r.err, std::regex(R"(tpcomm run: node (\d+) (cut off|down) .* at (\d+))"));
  ASSERT_EQ(cut.size(), 1u) << r.err;
  const long long cut_at = std::stoll(cut[0][3]);
  std::set<int> reported;
  for (const auto& e :
       matches(r.out, std::regex(R"(\[(\d+)\] rank \d+: ERROR \((\w+)\) at (\d+) )"
                                 R"(in call #(\d+), (\d+) wrong before it: (.*))"))) {
    const int rank = std::stoi(e[1]);
    reported.insert(rank);
    const long long after = std::stoll(e[3]) - cut_at;
    EXPECT_GE(after, -100) << "rank " << rank << " failed before the cut: " << e[0];
    EXPECT_LE(after, kDeadlineMs + kSlackMs) << "rank " << rank << ": " << e[0];
    EXPECT_GT(std::stoi(e[4]), 0) << "rank " << rank << " made no call before the cut: " << e[0];
    EXPECT_EQ(e[5], "0") << "rank " << rank << " returned wrong data as success";
    const bool on_cut_node = group.node_of(rank) == cut_node;
    EXPECT_TRUE(names_a_rank(
        e[6], [&](int other) { return (group.node_of(other) == cut_node) != on_cut_node; }))
        << "rank " << rank << "'s error names no rank across the cut: " << e[0];
  }
  EXPECT_EQ(reported.size(), static_cast<std::size_t>(group.ranks)) << r.out << r.err;
  EXPECT_EQ(network_namespaces(m).size(), 0u) << "a process of the run outlived it";
}

TEST(LinkFaults, APartitionedNodeEndsHierCallsOnEveryRankWithinTheDeadline) {
  cut_during_calls({4, 2}, "--link-cut", 1, {});
}

TEST(LinkFaults, ALinkSetDownEndsGlooCallsOnEveryRankWithinTheDeadline) {
  cut_during_calls({4, 2}, "--link-down", 1, {{"TPCOMM_DISABLE", "hier"}});
}

TEST(LinkFaults, ALinkSetDownOnOneOfThreeNodesEndsHierCallsEverywhere) {
  cut_during_calls({6, 3}, "--link-down", 2, {});
}

TEST(LinkFaults, APartitionOfOneOfThreeNodesEndsGlooCallsEverywhere) {
  cut_during_calls({6, 3}, "--link-cut", 0, {{"TPCOMM_DISABLE", "hier"}});
}

// 5% of the packets each node receives dropped at random: every call still succeeds, checked.
// The default deadline: a connection whose SYN and its retry are both lost waits 3 s (TCP's
// retry times), which the loss makes likely among a group's connections.
TEST(LinkFaults, FivePercentLossOnThreeNodesIsNoErrorAndNoWrongResult) {
  if (auto why = why_not_here({"ip", "nft"}); !why.empty()) GTEST_SKIP() << why;
  const std::string m = mark();
  auto r = run_until_lost({6, 3}, {"--link-loss", "5"}, {{"TPCOMM_TIMEOUT_MS", ""}}, "60", m);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto done = matches(r.out, std::regex(R"(rank \d+: (\d+) calls, 0 wrong, no error)"));
  EXPECT_EQ(done.size(), 6u) << r.out << r.err;
  for (const auto& d : done) EXPECT_EQ(d[1], "60") << r.out;
}

}  // namespace
}  // namespace tpcomm
