// hier_mpi in real processes: `tpcomm run --nodes 2 --launch mpirun` starts 4 ranks through mpirun
// over the simulated nodes' links, so they bootstrap through MPI and the plan runs MPI lanes.
// Every result is checked against references (float and integer, wrapping sums, the exchanges
// and rooted calls), a lane split
// that fails on one rank falls back to Gloo's lanes on every rank, and a stopped rank is a
// timeout on every other rank that names it, after which the job ends (no MPI_Finalize waits for
// the stopped rank) and nothing is left behind. Each test skips, saying why, without the node
// network or mpirun.
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <thread>

#include "node_network_support.hpp"
#include "support/test_support.hpp"
#include "tpcomm/plan.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm {
namespace {

using namespace test::node_network;

std::string why_not() {
  if (auto why = why_not_here({"ip"}); !why.empty()) return why;
  if (!(TPCOMM_HAVE_MPI && access("/usr/bin/mpirun", X_OK) == 0))
    return "this build has no MPI or mpirun is missing: not run";
  return "";
}

test::ProcessResult under_mpirun(const std::vector<std::string>& worker_args,
                                 std::map<std::string, std::string> env) {
  std::vector<std::string> argv = {TPCOMM_BIN,  "run", "-n",       "4",
                                   "--nodes",   "2",   "--launch", "mpirun",
                                   "--timeout", "100", "--",       TPCOMM_WORKER};
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  env.emplace("TPCOMM_DISABLE", "");
  env.emplace("ASAN_OPTIONS", "detect_leaks=0");
  return test::run_process(argv, env, std::chrono::seconds(110));
}

// Each rank's summary line: its backends and its results' hash.
std::vector<std::smatch> summaries(const std::string& out) {
  return matches(out, std::regex(R"(rank (\d): (\d+) checks, 0 failed; nodes=2 .* )"
                                 R"(results=([0-9a-f]+) backends=(\S+) exchanges=(\S+))"));
}

TEST(HierMpi, AnMpirunGroupOverTwoNodesRunsMpiLanesWithEveryResultRight) {
  if (auto why = why_not(); !why.empty()) GTEST_SKIP() << why;
  auto r = under_mpirun({"correctness"}, {});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = summaries(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (const auto& m : lines) {
    EXPECT_EQ(m[4].str(), "hier_mpi") << "every op, every size: " << m[0].str();
    // The exchanges and rooted calls through MPI's lanes too: all_to_all, gather and scatter
    // above 1 MiB and all_to_allv (routed by the last row) on Gloo.
    EXPECT_EQ(m[5].str(), "gloo,hier_mpi") << m[0].str();
    EXPECT_EQ(m[3].str(), lines[0][3].str()) << "results differ between ranks";
    EXPECT_GE(std::stoi(m[2].str()), 338) << m[0].str();
  }
}

// Deterministic mode over MPI's lanes: hier_mpi's reductions (per-node partial sums) take the
// ordered form, and every result is the rank-order sum computed in the worker.
TEST(HierMpi, DeterministicModeGivesTheRankOrderSumOverMpiLanes) {
  if (auto why = why_not(); !why.empty()) GTEST_SKIP() << why;
  auto r = under_mpirun({"deterministic"}, {{"TPCOMM_DETERMINISTIC", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = matches(
      r.out, std::regex(R"(rank \d: deterministic: (\d+) checks, 0 wrong, backends=(\S+))"));
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (const auto& m : lines) {
    EXPECT_EQ(m[1].str(), "48") << m[0].str();
    EXPECT_EQ(m[2].str(), "hier_mpi") << m[0].str();
  }
}

TEST(HierMpi, ALaneSplitThatFailsOnOneRankFallsBackToGlooLanesOnEveryRank) {
  if (auto why = why_not(); !why.empty()) GTEST_SKIP() << why;
  auto r = under_mpirun({"correctness"}, {{"TPCOMM_FAULT", "hier_mpi.mpi.split:fail@2"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = summaries(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (const auto& m : lines) EXPECT_EQ(m[4].str(), "hier") << m[0].str();
  const auto warned =
      matches(r.out + r.err, std::regex(R"(rank \d: hier_mpi disabled on every rank: step )"
                                        R"(hier_mpi.mpi.split failed on rank 2)"));
  EXPECT_EQ(warned.size(), 4u) << r.out << r.err;
}

TEST(HierMpi, AStoppedRankIsATimeoutOnEveryOtherRankAndTheJobEnds) {
  if (auto why = why_not(); !why.empty()) GTEST_SKIP() << why;
  const std::string tag = mark();
  const auto began = std::chrono::steady_clock::now();
  auto r = under_mpirun({"loop", "200", "4096", tag}, {{"TPCOMM_TIMEOUT_MS", "3000"},
                                                       {"TEST_STOP_RANK", "3"},
                                                       {"TEST_AFTER", "20"},
                                                       {"TPCOMM_TEST_MARK", tag}});
  const auto took = std::chrono::steady_clock::now() - began;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job had to be stopped by --timeout: " << r.out << r.err;
  EXPECT_LT(took, std::chrono::seconds(40)) << r.out;
  for (int rank : {0, 1}) {
    EXPECT_TRUE(std::regex_search(
        r.out, std::regex("rank " + std::to_string(rank) +
                          R"(: ERROR \(timeout\).* via hier_mpi failed: lane .*MPI lane: .*)"
                          R"(did not take part within 3000 ms; rank 3 did not time out)")))
        << r.out;
  }
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(rank 2: ERROR \(timeout\).*node group .*rank 1 did not arrive)")))
      << r.out;
  EXPECT_NE((r.out + r.err).find("MPI is not finalised"), std::string::npos) << r.out << r.err;
  EXPECT_TRUE(none_left_with_environment("TPCOMM_TEST_MARK=" + tag))
      << "processes of the job outlived it";
}

// `tpcomm run --launch mpirun --nodes 2 -- PROGRAM | head -1`: the reader goes away after one
// line. The launcher must not die of SIGPIPE (it used to, leaving node 1's orted and ranks
// spinning in MPI_Finalize): it drops the output, supervises the job to its end, and every
// process of it, on every node, ends.
TEST(HierMpi, AClosedStdoutDoesNotKillTheLauncherAndTheJobEndsEverywhere) {
  if (auto why = why_not(); !why.empty()) GTEST_SKIP() << why;
  const std::string tag = mark();
  const std::string rank_script =
      "for i in $(seq 40); do echo line $i; sleep 0.02; done; exec \"$0\" correctness";
  const std::string pipeline = fmt::format(
      "'{}' run -n 4 --nodes 2 --launch mpirun --timeout 100 -- bash -c '{}' '{}' "
      "| head -1; echo \"launcher status ${{PIPESTATUS[0]}}\"",
      TPCOMM_BIN, rank_script, TPCOMM_WORKER);
  auto r = test::run_process(
      {"/bin/bash", "-c", pipeline},
      {{"TPCOMM_DISABLE", ""}, {"ASAN_OPTIONS", "detect_leaks=0"}, {"TPCOMM_TEST_MARK", tag}},
      std::chrono::seconds(110));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("launcher status 0"), std::string::npos)
      << "141 is death by SIGPIPE: " << r.out << r.err;
  EXPECT_TRUE(none_left_with_environment("TPCOMM_TEST_MARK=" + tag))
      << "processes of the job outlived it";
}

// tpcomm tune over the simulated nodes under mpirun times hier_mpi beside hier and gloo, and the
// file it writes keeps the built-in candidates after each choice: a one-node group of the same
// size still plans shm with it, not the fallback engine.
TEST(HierMpi, TuneOverNodesUnderMpirunTimesMpiLanesAndWritesAFileOneNodeGroupsCanUse) {
  if (auto why = why_not(); !why.empty()) GTEST_SKIP() << why;
  const std::string file = "/tmp/tpcomm_tune_nodes_" + mark() + ".json";
  auto r = test::run_process({TPCOMM_BIN, "tune",  "-n",         "4",  "--nodes", "2",  "--launch",
                              "mpirun",   "--ops", "all_reduce", "-b", "4K",      "-e", "64K",
                              "-f",       "16",    "--rounds",   "1",  "-o",      file},
                             {{"TPCOMM_DISABLE", ""}, {"ASAN_OPTIONS", "detect_leaks=0"}},
                             std::chrono::seconds(200));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* candidate : {"hier_mpi/hierarchical", "hier/hierarchical", "gloo/gloo"}) {
    EXPECT_NE(r.err.find(std::string("tune: 4 ranks, all_reduce via ") + candidate),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.out.find(candidate), std::string::npos) << r.out;
  }
  const std::string text = test::read_file(file);
  unlink(file.c_str());
  EXPECT_NE(text.find("4 ranks over 2 simulated nodes (ranks started by mpirun)"),
            std::string::npos)
      << text;
  const auto tuned = decode_tuning(text, file);
  ASSERT_EQ(tuned.entries.size(), 1u);
  for (const auto& row : tuned.entries[0].ops.at(Op::kAllReduce)) {
    ASSERT_GE(row.use.size(), 2u) << "the built-in candidates follow the choice";
    bool shm_follows = false;
    for (const auto& c : row.use) shm_follows |= c.backend == Backend::kShm;
    EXPECT_TRUE(shm_follows);
  }
  FactsTable one_node;
  RankFacts rank;
  rank.host = "one";
  one_node.ranks.assign(4, rank);
  const Plan plan = make_plan(one_node, PlanOptions{}, tuned);
  for (const auto& row : plan.ops.at(Op::kAllReduce).table) EXPECT_EQ(row.backend, Backend::kShm);
}

}  // namespace
}  // namespace tpcomm
