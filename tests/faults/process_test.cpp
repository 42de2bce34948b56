// Real processes through `tpcomm run`: correctness at several world sizes and on simulated
// nodes, and every fault of the communicator issue — a rank that never starts, kill -9, SIGSTOP,
// mismatched calls, a corrupt facts record, a plan digest difference, a garbage store client,
// Ctrl-C — each ending in a clear error on every rank, with no process or segment left behind.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "support/test_support.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using test::ProcessResult;

const std::string kWorker = TPCOMM_WORKER;

std::string marker() {
  static int n = 0;
  return "tpcomm-test-marker-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

// Runs `tpcomm run ARGS -- worker WORKER_ARGS... MARKER` and returns its result.
ProcessResult run_group(std::vector<std::string> run_args, std::vector<std::string> worker_args,
                        std::map<std::string, std::string> env, const std::string& mark) {
  std::vector<std::string> argv = {TPCOMM_BIN, "run"};
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  argv.push_back("--");
  argv.push_back(kWorker);
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  argv.push_back(mark);
  for (const char* k :
       {"TPCOMM_FAULT", "TPCOMM_CHECK", "TPCOMM_LOG", "TPCOMM_DISABLE", "TPCOMM_SHM_WORKSPACE",
        "TPCOMM_SHM_STREAMING_FILL", "TPCOMM_SHM_SPIN_US", "TEST_SKIP_RANK", "TEST_KILL_RANK",
        "TEST_STOP_RANK", "TEST_AFTER", "TPCOMM_DUMP_FACTS", "TEST_OP"}) {
    env.emplace(k, "");
  }
  return test::run_process(argv, env);
}

// Processes whose command line contains `mark`.
int processes_with(const std::string& mark) {
  int found = 0;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
      std::ifstream f(std::string("/proc/") + e->d_name + "/cmdline");
      std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (cmd.find(mark) != std::string::npos) ++found;
    }
    closedir(d);
  }
  return found;
}

// tpcomm segments in /dev/shm created by the process `pid` (tpcomm-<kind>-<pid>-...). Other
// tests run in parallel, so only the processes a test killed are looked at.
int segments_of(const std::string& pid) {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      n += name.rfind("tpcomm-", 0) == 0 && name.find("-" + pid + "-") != std::string::npos;
    }
    closedir(d);
  }
  return n;
}

// The pid a worker printed as "(pid N)".
std::string pid_in(const std::string& line) {
  std::smatch m;
  return std::regex_search(line, m, std::regex("\\(pid (\\d+)\\)")) ? std::string(m[1])
                                                                    : std::string("none");
}

std::vector<std::string> lines_with(const std::string& text, const std::string& part) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(part) != std::string::npos) out.push_back(line);
  }
  return out;
}

// The wall-clock ms a worker printed after "at ".
long long time_in(const std::string& line) {
  std::smatch m;
  if (std::regex_search(line, m, std::regex(" at (\\d{10,})"))) return std::stoll(m[1]);
  return -1;
}

bool root() {
  return geteuid() == 0;
}

bool mpi_available() {
  return TPCOMM_HAVE_MPI && access("/usr/bin/mpirun", X_OK) == 0;
}

// The test helper itself: a program that outlives its limit is stopped, with what it started,
// and the test that ran it fails.
TEST(TestSupport, AGroupThatOutlivesItsLimitIsStoppedWithItsRanksAndFailsTheTest) {
  static std::string mark;
  static ProcessResult r;
  mark = marker();
  EXPECT_NONFATAL_FAILURE(r = test::run_process({TPCOMM_BIN, "run", "-n", "2", "--", "/bin/sh",
                                                 "-c", "sleep 30; : " + mark},
                                                {}, std::chrono::seconds(1)),
                          "still running after 1 s, stopped: ");
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(processes_with(mark), 0) << "the ranks were stopped too";
}

class Correctness : public ::testing::TestWithParam<int> {};

TEST_P(Correctness, EveryCollectiveDtypeOpAndSizeOnWRanks) {
  const int w = GetParam();
  const std::string mark = marker();
  auto r = run_group({"-n", std::to_string(w)}, {"correctness"}, {}, mark);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto done = lines_with(r.out, "338 checks, 0 failed; nodes=1");
  EXPECT_EQ(done.size(), static_cast<std::size_t>(w)) << r.out;
  std::set<std::string> digests;
  for (const auto& l : done) digests.insert(l.substr(l.find("digest=")));
  EXPECT_EQ(digests.size(), 1u) << "every rank agreed on one plan";
  EXPECT_EQ(processes_with(mark), 0);
}

// The larger worlds apart: the sanitizer pass leaves them to the release one
// (tests/CMakeLists.txt).
INSTANTIATE_TEST_SUITE_P(WorldSizes, Correctness, ::testing::Values(1, 2, 3));
INSTANTIATE_TEST_SUITE_P(LargeWorldSizes, Correctness, ::testing::Values(4, 8));

// The "results=" digests a correctness run printed (one per rank and world): two runs whose sets
// are equal computed the same bits.
std::set<std::string> results_of(const std::string& out) {
  std::set<std::string> found;
  for (const auto& l : lines_with(out, "results=")) found.insert(l.substr(l.find("results=")));
  return found;
}

// A tuning file with one row per operation for a `ranks` group: `ops` maps each op to its
// candidate's JSON.
std::string tuning_file(int ranks, const std::map<std::string, std::string>& ops) {
  char path[] = "/tmp/tpcomm-test-tuning-XXXXXX";
  close(mkstemp(path));
  std::string rows;
  for (const auto& [op, use] : ops) {
    rows += (rows.empty() ? "" : ", ") + ("\"" + op + "\": [{\"max_bytes\": null, \"use\": [") +
            use + "]}]";
  }
  std::ofstream(path) << R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu", "world_size": )"
                      << ranks << R"(, "ops": {)" << rows << "}}]}";
  return path;
}

// A tuning file that sends every all-gather of a `ranks` group to shm/single_copy.
std::string single_copy_tuning(int ranks) {
  return tuning_file(ranks, {{"all_gather", R"({"backend": "shm", "algorithm": "single_copy"})"}});
}

// The same matrix through each path the plan can take on one node, forced.
TEST(CorrectnessPaths, GlooWhenShmIsDisabledAndShmWithATinyWorkspace) {
  auto gloo = run_group({"-n", "3"}, {"correctness"}, {{"TPCOMM_DISABLE", "shm"}}, marker());
  EXPECT_EQ(gloo.exit_code, 0) << gloo.out << gloo.err;
  EXPECT_EQ(lines_with(gloo.out, "338 checks, 0 failed").size(), 3u) << gloo.out;
  // 4 KiB per rank: every larger message goes in chunks, across every chunk boundary.
  auto chunked =
      run_group({"-n", "3"}, {"correctness"}, {{"TPCOMM_SHM_WORKSPACE", "4096"}}, marker());
  EXPECT_EQ(chunked.exit_code, 0) << chunked.out << chunked.err;
  EXPECT_EQ(lines_with(chunked.out, "338 checks, 0 failed").size(), 3u) << chunked.out;
  auto plain = run_group({"-n", "3"}, {"correctness"}, {}, marker());
  EXPECT_EQ(results_of(chunked.out), results_of(plain.out)) << "chunking must not change a bit";
}

TEST(CorrectnessPaths, StreamingLaneFillsGiveTheSameBits) {
  // Every all-reduce of 4 KiB or more (one-shot, and two-shot above W = 3's one-shot limit) fills
  // its lane with streaming stores: the same bits as cached fills, and the log shows they ran.
  auto streaming = run_group({"-n", "3"}, {"correctness"},
                             {{"TPCOMM_SHM_STREAMING_FILL", "4096"},
                              {"TPCOMM_LOG", "debug"},
                              {"TPCOMM_LOG_SUBSYS", "shm"}},
                             marker());
  EXPECT_EQ(streaming.exit_code, 0) << streaming.out << streaming.err;
  EXPECT_EQ(lines_with(streaming.out, "338 checks, 0 failed").size(), 3u) << streaming.out;
  EXPECT_EQ(
      lines_with(streaming.out + streaming.err, "fills its lane with streaming stores").size(), 3u)
      << streaming.err;
  auto cached =
      run_group({"-n", "3"}, {"correctness"}, {{"TPCOMM_SHM_STREAMING_FILL", "0"}}, marker());
  EXPECT_EQ(cached.exit_code, 0) << cached.out << cached.err;
  EXPECT_EQ(results_of(streaming.out), results_of(cached.out)) << "streaming must not change a bit";
}

TEST(CorrectnessPaths, StepsThePlanSetsCrossEveryBoundaryWithTheSameBits) {
  // 4 KiB steps (the smallest a table may set) for every shm operation and algorithm.
  const std::string step = R"(, "step_bytes": 4096})";
  auto run_with = [&](const std::string& all_reduce_algorithm) {
    const std::string file = tuning_file(
        3, {{"all_reduce",
             R"({"backend": "shm", "algorithm": ")" + all_reduce_algorithm + "\"" + step},
            {"all_gather", R"({"backend": "shm", "algorithm": "one_shot")" + step},
            {"reduce_scatter", R"({"backend": "shm", "algorithm": "one_shot")" + step}});
    auto r = run_group({"-n", "3"}, {"correctness"}, {{"TPCOMM_TUNING", file}}, marker());
    std::remove(file.c_str());
    return r;
  };
  auto one_shot = run_with("one_shot");
  auto two_shot = run_with("two_shot");
  auto plain = run_group({"-n", "3"}, {"correctness"}, {}, marker());
  for (const auto* r : {&one_shot, &two_shot}) {
    EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
    EXPECT_EQ(lines_with(r->out, "338 checks, 0 failed").size(), 3u) << r->out;
    EXPECT_EQ(results_of(r->out), results_of(plain.out)) << "steps must not change a bit";
  }
}

TEST(CorrectnessPaths, AllGatherReadsPeersDirectlyOrThroughTheLanesWithTheSameBits) {
  // Processes: the single-copy path is process_vm_readv here (threads would use memcpy). Every
  // all-gather, of every size, goes through it with the tuning file; the built-in table sends a
  // group of 3 through the lanes, as does single_copy when TPCOMM_SHM_SINGLE_COPY=0 refuses it.
  const std::string tuning = single_copy_tuning(3);
  const std::map<std::string, std::string> debug = {{"TPCOMM_LOG", "debug"},
                                                    {"TPCOMM_LOG_SUBSYS", "shm"}};
  auto with = [&](std::map<std::string, std::string> env) {
    env.insert(debug.begin(), debug.end());
    env["TPCOMM_TUNING"] = tuning;
    return env;
  };
  auto direct = run_group({"-n", "3"}, {"correctness"}, with({}), marker());
  auto refused =
      run_group({"-n", "3"}, {"correctness"}, with({{"TPCOMM_SHM_SINGLE_COPY", "0"}}), marker());
  auto lanes = run_group({"-n", "3"}, {"correctness"}, debug, marker());
  std::remove(tuning.c_str());
  for (const auto* r : {&direct, &refused, &lanes}) {
    EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
    EXPECT_EQ(lines_with(r->out, "338 checks, 0 failed").size(), 3u) << r->out;
  }
  const std::string read_in_place = "input (single copy) in place";
  EXPECT_EQ(lines_with(direct.out + direct.err, "single-copy reads on").size(), 3u) << direct.err;
  EXPECT_EQ(lines_with(direct.out + direct.err, read_in_place).size(), 3u) << direct.err;
  EXPECT_EQ(lines_with(refused.out + refused.err, "single-copy reads off").size(), 3u)
      << refused.err;
  EXPECT_EQ(lines_with(refused.out + refused.err, read_in_place).size(), 0u) << refused.err;
  // The worker's all_to_allv reads large blocks in place on every path: the all-gathers must not.
  EXPECT_EQ(lines_with(lanes.out + lanes.err, "(all_gather) reads").size(), 0u) << lanes.err;
  EXPECT_EQ(results_of(direct.out), results_of(lanes.out)) << "the path must not change a bit";
  EXPECT_EQ(results_of(refused.out), results_of(lanes.out)) << "the path must not change a bit";
}

TEST(CorrectnessPaths, AllReduceReadsPeersDirectlyInStepsWithTheSameBitsAsOneShot) {
  // Every all-reduce of a group of 3 through single_copy, in 4 KiB steps (every step boundary);
  // in-place calls among them go through their lanes. Refused, the same calls are one-shot's.
  const std::string file = tuning_file(
      3, {{"all_reduce", R"({"backend": "shm", "algorithm": "single_copy", "step_bytes": 4096})"}});
  std::map<std::string, std::string> env = {
      {"TPCOMM_LOG", "debug"}, {"TPCOMM_LOG_SUBSYS", "shm"}, {"TPCOMM_TUNING", file}};
  auto direct = run_group({"-n", "3"}, {"correctness"}, env, marker());
  env["TPCOMM_SHM_SINGLE_COPY"] = "0";
  auto refused = run_group({"-n", "3"}, {"correctness"}, env, marker());
  std::remove(file.c_str());
  auto plain = run_group({"-n", "3"}, {"correctness"}, {}, marker());
  for (const auto* r : {&direct, &refused}) {
    EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
    EXPECT_EQ(lines_with(r->out, "338 checks, 0 failed").size(), 3u) << r->out;
    EXPECT_EQ(results_of(r->out), results_of(plain.out)) << "the path must not change a bit";
  }
  EXPECT_EQ(lines_with(direct.out + direct.err, "input (single copy) in place").size(), 3u)
      << direct.err;
  EXPECT_EQ(lines_with(refused.out + refused.err, "input (single copy) in place").size(), 0u)
      << refused.err;
}

TEST(Faults, MismatchedCountThroughShmIsAnErrorNotGarbage) {
  auto r = run_group({"-n", "2", "--keep-going"}, {"mismatch", "count"}, {}, marker());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  const std::string a = "all_reduce(float32 x 1024, sum) #2 (shm one_shot)";
  const std::string b = "all_reduce(float32 x 2048, sum) #2 (shm one_shot)";
  auto one_way = lines_with(r.out, "rank 1 called " + b + " but rank 0 called " + a);
  auto other_way = lines_with(r.out, "rank 0 called " + a + " but rank 1 called " + b);
  EXPECT_EQ(one_way.size() + other_way.size(), 2u) << r.out;
}

TEST(SimulatedNodes, TwoNodesPlanTwoNodesAndComputeTheSameResults) {
  if (!root()) GTEST_SKIP() << "tpcomm run --nodes needs root to create namespaces; not root here";
  char dump[] = "/tmp/tpcomm_dump_XXXXXX";
  int fd = mkstemp(dump);
  close(fd);
  auto r = run_group({"-n", "4", "--nodes", "2"}, {"correctness"}, {{"TPCOMM_DUMP_FACTS", dump}},
                     marker());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(lines_with(r.out, "338 checks, 0 failed; nodes=2 host=sim-node-0").size(), 2u) << r.out;
  EXPECT_EQ(lines_with(r.out, "338 checks, 0 failed; nodes=2 host=sim-node-1").size(), 2u) << r.out;
  // Every rank holds the same results, bit for bit; all-reduce went through hier.
  std::set<std::string> results;
  for (const auto& l : lines_with(r.out, "results=")) results.insert(l.substr(l.find("results=")));
  EXPECT_EQ(results.size(), 1u) << r.out;
  // The dumped facts replay with tpcomm plan: two nodes, hier eligible, shm refused.
  auto plan = test::run_process({TPCOMM_BIN, "plan", dump, "--json"});
  unlink(dump);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("\"nodes\": 2"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("(sim-node-0: ranks 0-1; sim-node-1: ranks 2-3)"), std::string::npos);
}

TEST(SimulatedNodes, HierCarriesEqualNodesAndIsRefusedForUnequalOnes) {
  if (!root()) GTEST_SKIP() << "tpcomm run --nodes needs root to create namespaces; not root here";
  auto equal = run_group({"-n", "6", "--nodes", "3"}, {"create"}, {}, marker());
  EXPECT_EQ(equal.exit_code, 0) << equal.out << equal.err;
  EXPECT_TRUE(lines_with(equal.out, "hier refused").empty()) << equal.out;
  auto unequal = run_group({"-n", "3", "--nodes", "2"}, {"random", "200"}, {}, marker());
  EXPECT_EQ(unequal.exit_code, 0) << unequal.out << unequal.err;
  EXPECT_EQ(lines_with(unequal.out, "200 random calls, 0 failed").size(), 3u) << unequal.out;
  EXPECT_FALSE(
      lines_with(unequal.err,
                 "hier needs the same number of ranks on every node (node 0: 2, node 1: 1)")
          .empty())
      << unequal.err;
}

TEST(Faults, ARankThatNeverStartsIsNamedByEveryOtherRank) {
  const auto start = std::chrono::steady_clock::now();
  auto r = run_group({"-n", "3", "--keep-going"}, {"create"},
                     {{"TPCOMM_TIMEOUT_MS", "2000"}, {"TEST_SKIP_RANK", "2"}}, marker());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_NE(r.exit_code, 0);
  auto errors = lines_with(r.out, "rank 2 did not join within 2000 ms (facts exchange)");
  EXPECT_EQ(errors.size(), 2u) << r.out;
  // Far below the 60 s default, so the deadline set is the one honoured; the slack covers three
  // processes starting under AddressSanitizer beside other tests on 2 cores (4.3 s seen in CI,
  // where "timeout + 2 s" failed).
  EXPECT_LT(elapsed, std::chrono::milliseconds(2000 + 8000)) << "timeout + 8 s";
  std::cout << "[ info ] never-started rank detected after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
            << " ms (TPCOMM_TIMEOUT_MS=2000)\n";
}

TEST(Faults, KillNineInALongLoopIsNamedBySurvivorsAndLeavesNothing) {
  const std::string mark = marker();
  auto r = run_group(
      {"-n", "3", "--keep-going"}, {"loop", "100000", "262144"},
      {{"TPCOMM_TIMEOUT_MS", "10000"}, {"TEST_KILL_RANK", "1"}, {"TEST_AFTER", "30"}}, mark);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("rank 1 was killed by signal 9"), std::string::npos) << r.err;
  auto killed = lines_with(r.out, "killing itself (pid ");
  ASSERT_EQ(killed.size(), 1u) << r.out;
  auto errors = lines_with(r.out, "ERROR");
  ASSERT_EQ(errors.size(), 2u) << r.out;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("all_reduce(float32 x 262144, avg) #31 via shm failed"), std::string::npos)
        << e;
    EXPECT_NE(e.find("rank 1 gone (the process ended"), std::string::npos) << e;
    EXPECT_NE(e.find("(shm two_shot) cannot complete"), std::string::npos) << e;
    const long long detected = time_in(e) - time_in(killed[0]);
    EXPECT_LT(detected, 10000) << "within the timeout";
    std::cout << "[ info ] kill -9 detected after " << detected << " ms: " << e << "\n";
  }
  EXPECT_EQ(processes_with(mark), 0) << "no process left";
  EXPECT_EQ(segments_of(pid_in(killed[0])), 0) << "no /dev/shm segment left by the killed rank";
  // Without --keep-going the launcher stops the survivors itself and names the rank.
  const std::string mark2 = marker();
  auto stop = run_group({"-n", "3"}, {"loop", "100000", "262144"},
                        {{"TEST_KILL_RANK", "2"}, {"TEST_AFTER", "5"}}, mark2);
  EXPECT_EQ(stop.exit_code, 128 + 9);
  EXPECT_NE(stop.err.find("tpcomm run: rank 2 was killed by signal 9 (Killed); stopped the group"),
            std::string::npos)
      << stop.err;
  EXPECT_EQ(processes_with(mark2), 0);
}

TEST(Faults, KillNineInsideAOneShotCall) {
  const std::string mark = marker();
  auto r = run_group(
      {"-n", "3", "--keep-going"}, {"loop", "100000", "1024"},
      {{"TPCOMM_TIMEOUT_MS", "10000"}, {"TEST_KILL_RANK", "2"}, {"TEST_AFTER", "50"}}, mark);
  auto killed = lines_with(r.out, "killing itself (pid ");
  ASSERT_EQ(killed.size(), 1u) << r.out;
  auto errors = lines_with(r.out, "(shm one_shot) cannot complete");
  ASSERT_EQ(errors.size(), 2u) << r.out;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("rank 2 ("), std::string::npos) << e;
    std::cout << "[ info ] kill -9 in a one-shot call detected after "
              << time_in(e) - time_in(killed[0]) << " ms\n";
  }
  EXPECT_EQ(processes_with(mark), 0);
  EXPECT_EQ(segments_of(pid_in(killed[0])), 0) << "no /dev/shm segment left by the killed rank";
}

// All-to-all: a rank killed between calls (its peers inside the next one, through the lanes and
// reading blocks in place) is named by both survivors within the deadline; nothing is left.
TEST(Faults, KillNineMidAllToAllIsNamedByEverySurvivor) {
  for (const char* count : {"1000", "100000"}) {  // lanes; blocks read in place
    const std::string mark = marker();
    auto r = run_group({"-n", "3", "--keep-going"}, {"loop", "100000", count},
                       {{"TPCOMM_TIMEOUT_MS", "10000"},
                        {"TEST_OP", "all_to_all"},
                        {"TEST_KILL_RANK", "1"},
                        {"TEST_AFTER", "20"}},
                       mark);
    auto killed = lines_with(r.out, "killing itself (pid ");
    ASSERT_EQ(killed.size(), 1u) << r.out;
    auto errors = lines_with(r.out, "ERROR");
    ASSERT_EQ(errors.size(), 2u) << r.out;
    for (const auto& e : errors) {
      EXPECT_NE(e.find(std::string("all_to_all(float32 x ") + count + ") #21 via shm failed"),
                std::string::npos)
          << e;
      EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
      EXPECT_LT(time_in(e) - time_in(killed[0]), 10000) << "within the timeout";
    }
    EXPECT_EQ(processes_with(mark), 0);
    EXPECT_EQ(segments_of(pid_in(killed[0])), 0) << "no /dev/shm segment left by the killed rank";
  }
}

TEST(Faults, KillNineWhilePeersReadItsRegisteredInputIsNamedAndLeavesNothing) {
  // 64 KiB inputs in registered buffers: the survivors read rank 2's memory in place when it
  // dies. Its mapping stays valid for them (no SIGBUS); they name it within the deadline.
  const std::string mark = marker();
  auto r = run_group({"-n", "3", "--keep-going"}, {"loop", "100000", "16384"},
                     {{"TPCOMM_TIMEOUT_MS", "10000"},
                      {"TEST_KILL_RANK", "2"},
                      {"TEST_AFTER", "50"},
                      {"TEST_REGISTERED", "1"}},
                     mark);
  auto killed = lines_with(r.out, "killing itself (pid ");
  ASSERT_EQ(killed.size(), 1u) << r.out;
  auto errors = lines_with(r.out, "cannot complete");
  ASSERT_EQ(errors.size(), 2u) << r.out << r.err;
  for (const auto& e : errors) EXPECT_NE(e.find("rank 2 ("), std::string::npos) << e;
  EXPECT_EQ(lines_with(r.out + r.err, "signal 7").size(), 0u) << "no SIGBUS: " << r.out << r.err;
  EXPECT_EQ(processes_with(mark), 0);
  EXPECT_EQ(segments_of(pid_in(killed[0])), 0) << "no /dev/shm segment left by the killed rank";
}

TEST(Faults, AThousandRandomSmallCallsStayCorrect) {
  auto r = run_group({"-n", "3"}, {"random", "1000"}, {}, marker());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(lines_with(r.out, "1000 random calls, 0 failed").size(), 3u) << r.out;
}

TEST(Faults, StaleSegmentsOfDeadProcessesDoNotBreakANewGroup) {
  // Segments named like tpcomm's, of a process that no longer exists, twenty minutes old.
  const int dead_pid = 4'000'000 - 7;  // above pid_max's default: never a live process
  std::vector<std::string> stale = {"/dev/shm/tpcomm-node-" + std::to_string(dead_pid) + "-0",
                                    "/dev/shm/tpcomm-shm-" + std::to_string(dead_pid) + "-0"};
  for (const auto& path : stale) {
    std::ofstream(path) << "stale";
    timespec old[2] = {{time(nullptr) - 1200, 0}, {time(nullptr) - 1200, 0}};
    utimensat(AT_FDCWD, path.c_str(), old, 0);
  }
  auto r = run_group({"-n", "2"}, {"create"}, {}, marker());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const auto& path : stale) EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " was swept";
}

TEST(Faults, FullDevShmIsAClearRefusalAndGlooCarriesTheGroup) {
  if (!root())
    GTEST_SKIP() << "needs root to mount a small tmpfs in a private mount namespace; not root here";
  const std::string cmd =
      "mount --make-rprivate / && mount -t tmpfs -o size=256k tmpfs /dev/shm && exec " +
      std::string(TPCOMM_BIN) + " run -n 2 -- " + kWorker + " create";
  auto r = test::run_process({"/usr/bin/unshare", "-m", "/bin/sh", "-c", cmd});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto refused = lines_with(r.out,
                            "shm refused: disabled by its set-up: step shm.create failed on rank "
                            "0: shm: the segment needs");
  EXPECT_EQ(refused.size(), 2u) << r.out << r.err;
  for (const auto& l : refused) {
    EXPECT_NE(l.find("in /dev/shm but only"), std::string::npos) << l;
    EXPECT_NE(l.find("TPCOMM_SHM_WORKSPACE"), std::string::npos) << l;
  }
}

TEST(Faults, SigstopOfOneRankTimesOutTheOthers) {
  const std::string mark = marker();
  auto r = run_group({"-n", "3", "--keep-going", "--grace", "1"}, {"loop", "100000", "262144"},
                     {{"TPCOMM_TIMEOUT_MS", "2000"}, {"TEST_STOP_RANK", "1"}, {"TEST_AFTER", "30"}},
                     mark);
  auto stopped = lines_with(r.out, "stopping itself (pid ");
  ASSERT_EQ(stopped.size(), 1u) << r.out;
  auto errors = lines_with(r.out, "ERROR");
  // Both survivors time out on their own deadline (--keep-going); the stopped rank is then
  // killed by the launcher's stop sequence once both have failed.
  EXPECT_EQ(errors.size(), 2u) << r.out;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("#31 via shm failed: rank 1 did not arrive within 2000 ms"), std::string::npos)
        << e;
    const long long detected = time_in(e) - time_in(stopped[0]);
    EXPECT_LT(detected, 2000 + 2000);
    std::cout << "[ info ] SIGSTOP detected after " << detected << " ms (TPCOMM_TIMEOUT_MS=2000)\n";
  }
  EXPECT_EQ(processes_with(mark), 0);
}

TEST(Waiting, ARankWaitingForASlowPeerSpinsForTheSpinTimeThenSleeps) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    GTEST_SKIP() << "needs 2 CPUs: where 2 ranks outnumber the CPUs a wait yields at once, "
                    "whatever TPCOMM_SHM_SPIN_US says";
  }
  // Rank 1 starts its call 1.2 s after rank 0; rank 0's thread CPU time over its wait tells
  // whether it spun (burning the CPU) or slept.
  auto rank0 = [](const ProcessResult& r, long long* waited) {
    const auto line = lines_with(r.out, "rank 0: waited");
    if (line.size() != 1) return -1.0;
    double cpu = -1;
    const std::string text = line[0].substr(line[0].find("rank 0: waited"));  // after "[0] "
    if (std::sscanf(text.c_str(), "rank 0: waited %lld ms, %lf ms of CPU", waited, &cpu) != 2) {
      return -1.0;
    }
    return cpu;
  };
  long long waited = 0;
  auto brief = run_group({"-n", "2"}, {"slow_peer", "1200"}, {}, marker());
  ASSERT_EQ(brief.exit_code, 0) << brief.out << brief.err;
  EXPECT_EQ(lines_with(brief.out, ", 0 wrong").size(), 2u) << brief.out;
  const double brief_cpu = rank0(brief, &waited);
  EXPECT_GE(waited, 1000) << brief.out;
  EXPECT_GE(brief_cpu, 0) << brief.out;
  EXPECT_LT(brief_cpu, 50) << "the default spins 1 ms, then sleeps\n" << brief.out;
  auto spinning =
      run_group({"-n", "2"}, {"slow_peer", "1200"}, {{"TPCOMM_SHM_SPIN_US", "1000000"}}, marker());
  ASSERT_EQ(spinning.exit_code, 0) << spinning.out << spinning.err;
  EXPECT_EQ(lines_with(spinning.out, ", 0 wrong").size(), 2u) << spinning.out;
  // Spinning costs CPU for the whole second; sleeping about none (the brief run: < 50 ms, about
  // 1 in practice). The bound is low because a spinning thread gets only its share of a core
  // when other tests (or builds) run beside it: 210 ms of a 1.2 s wait was seen under a build.
  EXPECT_GE(rank0(spinning, &waited), 100) << "asked to spin 1 s\n" << spinning.out;
  EXPECT_GE(waited, 1000) << spinning.out;
}

TEST(Faults, InjectedCallFailureIsNamedOnEveryRank) {
  const std::string mark = marker();
  auto r = run_group({"-n", "3", "--keep-going"}, {"loop", "20", "4096"},
                     {{"TPCOMM_FAULT", "call:fail@1#5"}}, mark);
  EXPECT_NE(r.exit_code, 0);
  auto errors = lines_with(r.out, "ERROR");
  ASSERT_EQ(errors.size(), 3u) << r.out;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("all_reduce(float32 x 4096, avg) #5 via shm failed"), std::string::npos) << e;
    EXPECT_NE(e.find("injected fault: call fails on rank 1 (TPCOMM_FAULT)"), std::string::npos)
        << e;
  }
  EXPECT_EQ(processes_with(mark), 0);
}

TEST(Faults, InjectedCallStallIsATimeoutNamingTheStalledRank) {
  auto r = run_group({"-n", "3", "--keep-going", "--grace", "0.5"}, {"loop", "20", "4096"},
                     {{"TPCOMM_TIMEOUT_MS", "1500"}, {"TPCOMM_FAULT", "call:stall@1#5"}}, marker());
  EXPECT_NE(r.exit_code, 0);
  auto errors = lines_with(r.out, "ERROR (timeout)");
  ASSERT_EQ(errors.size(), 2u) << r.out;  // ranks 0 and 2; rank 1 sleeps in its call
  for (const auto& e : errors) {
    EXPECT_NE(e.find("#5 via shm failed: rank 1 did not arrive within 1500 ms"), std::string::npos)
        << e;
  }
}

// Without a launcher, rank 0 serves the store itself; when it dies the survivors name it (they
// said only "the store is unreachable").
TEST(Faults, TheRankThatServedTheStoreIsNamedWhenItDies) {
  const std::string mark = marker();
  const std::string script =
      "for r in 0 1 2; do RANK=$r " + kWorker + " loop 1000 4096 " + mark + " & done; wait";
  auto r = test::run_process({"/bin/sh", "-c", script},
                             {{"WORLD_SIZE", "3"},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", std::to_string(test::free_loopback_port())},
                              {"TPCOMM_DISABLE", "shm"},
                              {"TPCOMM_TIMEOUT_MS", "5000"},
                              {"TEST_KILL_RANK", "0"},
                              {"TEST_AFTER", "5"},
                              {"TPCOMM_FAULT", ""},
                              {"TPCOMM_CHECK", ""}});
  auto errors = lines_with(r.out, "ERROR");
  ASSERT_EQ(errors.size(), 2u) << r.out << r.err;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("the store, served by rank 0, is unreachable too: rank 0 is gone"),
              std::string::npos)
        << e;
  }
  EXPECT_EQ(processes_with(mark), 0);
}

// hier: the two nodes call 1024 and 1023 elements; each node's stages agree within the node and
// the per-rank slices (512) are equal, so only the whole call tells them apart.
TEST(Faults, HierCallsThatDifferByOneElementAreAMismatchOnEveryRank) {
  if (!root()) GTEST_SKIP() << "hier needs simulated nodes, which need root to create namespaces";
  auto r = run_group({"-n", "4", "--nodes", "2", "--keep-going"}, {"mismatch", "count_by_one"}, {},
                     marker());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  auto errors = lines_with(r.out, "ERROR (mismatch)");
  ASSERT_EQ(errors.size(), 4u) << r.out << r.err;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("of all_reduce(float32 x 1023, sum)"), std::string::npos) << e;
    EXPECT_NE(e.find("of all_reduce(float32 x 1024, sum)"), std::string::npos) << e;
  }
  EXPECT_TRUE(lines_with(r.out, "was not detected").empty()) << r.out;
}

// A dead peer and a stopped peer where Gloo carries the calls (shm disabled), and where hier does
// (two simulated nodes): every survivor names the rank, within the deadline.
struct EngineCase {
  std::string name;
  std::vector<std::string> run_args;
  std::map<std::string, std::string> env;
  std::string via;
};

void PrintTo(const EngineCase& c, std::ostream* os) {
  *os << c.name;
}

class FaultsOverEngine : public ::testing::TestWithParam<EngineCase> {
 protected:
  void SetUp() override {
    if (GetParam().name == "hier" && !root())
      GTEST_SKIP() << "hier needs simulated nodes, which need root to create namespaces";
  }
  ProcessResult run_with(std::map<std::string, std::string> extra, const std::string& mark) {
    auto env = GetParam().env;
    env.insert(extra.begin(), extra.end());
    auto args = GetParam().run_args;
    args.insert(args.end(), {"--keep-going", "--grace", "1"});
    return run_group(args, {"loop", "1000", "4096"}, env, mark);
  }
};

TEST_P(FaultsOverEngine, KillNineIsNamedByEverySurvivor) {
  const std::string mark = marker();
  auto r =
      run_with({{"TPCOMM_TIMEOUT_MS", "5000"}, {"TEST_KILL_RANK", "1"}, {"TEST_AFTER", "5"}}, mark);
  auto killed = lines_with(r.out, "killing itself (pid ");
  ASSERT_EQ(killed.size(), 1u) << r.out;
  auto errors = lines_with(r.out, "ERROR");
  const std::size_t ranks = GetParam().name == "hier" ? 4 : 3;
  ASSERT_EQ(errors.size(), ranks - 1) << r.out << r.err;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("#6 via " + GetParam().via + " failed"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 1 gone"), std::string::npos) << e;
    EXPECT_LT(time_in(e) - time_in(killed[0]), 5000) << "within the timeout";
  }
  EXPECT_EQ(processes_with(mark), 0);
}

// The same mid all-to-all: Gloo carries it, and hier's two exchanges (its lane over Gloo).
TEST_P(FaultsOverEngine, KillNineMidAllToAllIsNamedByEverySurvivor) {
  const std::string mark = marker();
  auto r = run_with({{"TPCOMM_TIMEOUT_MS", "5000"},
                     {"TEST_OP", "all_to_all"},
                     {"TEST_KILL_RANK", "1"},
                     {"TEST_AFTER", "5"}},
                    mark);
  auto killed = lines_with(r.out, "killing itself (pid ");
  ASSERT_EQ(killed.size(), 1u) << r.out;
  auto errors = lines_with(r.out, "ERROR");
  const std::size_t ranks = GetParam().name == "hier" ? 4 : 3;
  ASSERT_EQ(errors.size(), ranks - 1) << r.out << r.err;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("all_to_all(float32 x 4096) #6 via " + GetParam().via + " failed"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("rank 1 gone"), std::string::npos) << e;
    EXPECT_LT(time_in(e) - time_in(killed[0]), 5000) << "within the timeout";
  }
  EXPECT_EQ(processes_with(mark), 0);
}

TEST_P(FaultsOverEngine, SigstopIsATimeoutNamingTheStoppedRank) {
  const std::string mark = marker();
  auto r =
      run_with({{"TPCOMM_TIMEOUT_MS", "2000"}, {"TEST_STOP_RANK", "1"}, {"TEST_AFTER", "5"}}, mark);
  auto stopped = lines_with(r.out, "stopping itself (pid ");
  ASSERT_EQ(stopped.size(), 1u) << r.out;
  auto errors = lines_with(r.out, "ERROR (timeout)");
  const std::size_t ranks = GetParam().name == "hier" ? 4 : 3;
  ASSERT_EQ(errors.size(), ranks - 1) << r.out << r.err;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("#6 via " + GetParam().via + " failed"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 1 did not time out in call #6 as the others did"), std::string::npos)
        << e;
    EXPECT_LT(time_in(e) - time_in(stopped[0]), 2000 + 2000);
  }
  EXPECT_EQ(processes_with(mark), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Engines, FaultsOverEngine,
    ::testing::Values(EngineCase{"gloo", {"-n", "3"}, {{"TPCOMM_DISABLE", "shm"}}, "gloo"},
                      EngineCase{"hier", {"-n", "4", "--nodes", "2"}, {}, "hier"}),
    [](const ::testing::TestParamInfo<EngineCase>& p) { return p.param.name; });

// TPCOMM_DUMP_FACTS writes through a fresh file of its own: a link left at a guessable name
// beside the target (it used to write "<path>.tmp", following links) is never written through.
TEST(DumpFacts, ALinkBesideTheTargetIsNotFollowed) {
  const std::string dir = "/tmp/" + marker();
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string victim = dir + "/victim", target = dir + "/facts.json";
  std::ofstream(victim) << "keep me\n";
  ASSERT_EQ(symlink(victim.c_str(), (target + ".tmp").c_str()), 0);
  auto r = run_group({"-n", "2"}, {"create"}, {{"TPCOMM_DUMP_FACTS", target}}, marker());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(test::read_file(victim), "keep me\n");
  EXPECT_NE(test::read_file(target).find("\"tpcomm_facts\": 1"), std::string::npos);
  int entries = 0;  // the target, the victim and the link: no temporary file left
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) entries += e->d_name[0] != '.';
    closedir(d);
  }
  EXPECT_EQ(entries, 3);
  for (const auto& f : {victim, target, target + ".tmp"}) unlink(f.c_str());
  rmdir(dir.c_str());
}

// The log subsystems each message names, over a whole group's creation.
std::set<std::string> log_subsystems(const std::string& text) {
  std::set<std::string> found;
  std::smatch m;
  std::regex tag("\\[tpcomm (?:error|warn|info|debug) ([a-z_]+)\\]");
  for (auto it = text.cbegin(); std::regex_search(it, text.cend(), m, tag); it = m[0].second) {
    found.insert(m[1]);
  }
  return found;
}

TEST(Logging, TheSubsystemListKeepsOnlyTheNamedSubsystems) {
  auto all = run_group({"-n", "2"}, {"create"}, {{"TPCOMM_LOG", "debug"}}, marker());
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const auto everything = log_subsystems(all.out + all.err);
  for (const char* s : {"comm", "probe", "store"}) {
    EXPECT_TRUE(everything.count(s)) << s << " logs at debug: " << all.err;
  }
  auto some = run_group({"-n", "2"}, {"create"},
                        {{"TPCOMM_LOG", "debug"}, {"TPCOMM_LOG_SUBSYS", "probe,store"}}, marker());
  ASSERT_EQ(some.exit_code, 0) << some.err;
  EXPECT_EQ(log_subsystems(some.out + some.err), (std::set<std::string>{"probe", "store"}))
      << some.out << some.err;
}

// TPCOMM_SOCKET_ADDRESS is where Gloo listens: another loopback address works, and an address
// this host does not have is a set-up failure that names it on every rank.
TEST(SocketAddress, GlooListensWhereTheVariableSaysAndABadAddressIsNamed) {
  auto good =
      run_group({"-n", "2"}, {"correctness"},
                {{"TPCOMM_DISABLE", "shm"}, {"TPCOMM_SOCKET_ADDRESS", "127.0.0.2"}}, marker());
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  EXPECT_EQ(lines_with(good.out, "338 checks, 0 failed").size(), 2u) << good.out;
  auto bad = run_group(
      {"-n", "2", "--keep-going"}, {"create"},
      {{"TPCOMM_DISABLE", "shm"}, {"TPCOMM_SOCKET_ADDRESS", "no.such.host.invalid"}}, marker());
  EXPECT_NE(bad.exit_code, 0);
  auto errors = lines_with(bad.out, "ERROR");
  EXPECT_EQ(errors.size(), 2u) << bad.out << bad.err;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("the fallback engine gloo could not be set up"), std::string::npos) << e;
    EXPECT_NE(e.find("no.such.host.invalid"), std::string::npos) << e;
  }
}

class Mismatch : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(Mismatch, CheckNamesBothSidesOnEveryRank) {
  const auto& [kind, odd] = GetParam();
  auto r =
      run_group({"-n", "3", "--keep-going"}, {"mismatch", kind}, {{"TPCOMM_CHECK", "1"}}, marker());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  auto errors = lines_with(r.out, "does not match across ranks (TPCOMM_CHECK=1)");
  EXPECT_EQ(errors.size(), 3u) << r.out;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("ranks 0, 2 called all_reduce(float32 x 1024, sum)"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 1 called " + odd), std::string::npos) << e;
  }
}

// Without TPCOMM_CHECK: Gloo compares every call before moving data (a count mismatch used to
// abort the process in Gloo's thread, sum against max gave wrong results silently).
TEST_P(Mismatch, GlooNamesBothSidesOnEveryRankWithoutTheCheck) {
  const auto& [kind, odd] = GetParam();
  const std::string mark = marker();
  auto r =
      run_group({"-n", "3", "--keep-going"}, {"mismatch", kind}, {{"TPCOMM_DISABLE", "shm"}}, mark);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  auto errors = lines_with(r.out, "ERROR (mismatch)");
  ASSERT_EQ(errors.size(), 3u) << r.out << r.err;
  for (const auto& e : errors) {
    EXPECT_NE(e.find(odd + " #2"), std::string::npos) << e;
    EXPECT_NE(e.find("all_reduce(float32 x 1024, sum) #2"), std::string::npos) << e;
  }
  EXPECT_TRUE(lines_with(r.out, "was not detected").empty()) << r.out;
  EXPECT_EQ(processes_with(mark), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, Mismatch,
    ::testing::Values(
        std::make_pair(std::string("count"), std::string("all_reduce(float32 x 2048, sum)")),
        std::make_pair(std::string("count_large"),
                       std::string("all_reduce(float32 x 1048576, sum)")),
        std::make_pair(std::string("dtype"), std::string("all_reduce(bfloat16 x 1024, sum)")),
        std::make_pair(std::string("op"), std::string("all_reduce(float32 x 1024, max)"))));

TEST(Faults, CorruptFactsRecordIsAnErrorNamingTheSender) {
  auto r = run_group({"-n", "3", "--keep-going"}, {"create"}, {{"TPCOMM_FAULT", "facts:corrupt@1"}},
                     marker());
  EXPECT_NE(r.exit_code, 0);
  auto errors = lines_with(r.out, "facts record from rank 1 is corrupt: header says");
  EXPECT_EQ(errors.size(), 3u) << r.out;
}

TEST(Faults, PlanDigestDifferenceIsAnErrorNamingTheRanks) {
  auto r = run_group({"-n", "3", "--keep-going"}, {"create"},
                     {{"TPCOMM_FAULT", "digest:corrupt@2"}}, marker());
  EXPECT_EQ(r.exit_code, 3);
  auto errors = lines_with(r.out, "the ranks disagree on the plan: ");
  EXPECT_EQ(errors.size(), 3u) << r.out;
  for (const auto& e : errors) {
    EXPECT_NE(e.find("rank 2 computed 0000000000000000"), std::string::npos) << e;
    EXPECT_NE(e.find("ranks 0-1 computed "), std::string::npos) << e;
  }
}

TEST(Faults, StallAtSetUpIsATimeoutNamingTheRank) {
  auto r =
      run_group({"-n", "2", "--keep-going", "--grace", "0.5"}, {"create"},
                {{"TPCOMM_TIMEOUT_MS", "1500"}, {"TPCOMM_FAULT", "shm.map:stall@1"}}, marker());
  EXPECT_NE(r.exit_code, 0);
  auto errors = lines_with(r.out, "rank 1 did not arrive within 1500 ms (set-up vote on shm.map)");
  EXPECT_EQ(errors.size(), 1u) << r.out;
}

using test::spawn;

// Starts a 3-rank group in an endless loop, waits until every rank is inside it, sends the
// launcher `signal_number`, and returns the launcher's exit status.
int signal_a_running_group(int signal_number, const std::string& mark) {
  const std::string out = "/tmp/" + mark + ".out";
  pid_t launcher = spawn(
      {TPCOMM_BIN, "run", "-n", "3", "--", kWorker, "loop", "100000000", "1024", mark}, {}, out);
  auto looping = [&] {
    std::ifstream in(out);  // may not exist yet
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return lines_with(text, "looping").size();
  };
  for (int i = 0; i < 1000 && looping() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(looping(), 3u) << "every rank in the loop";
  kill(launcher, signal_number);
  int status = 0;
  waitpid(launcher, &status, 0);
  unlink(out.c_str());
  EXPECT_TRUE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

TEST(Launcher, CtrlCReachesEveryRankAndNothingIsLeft) {
  const std::string mark = marker();
  EXPECT_EQ(signal_a_running_group(SIGINT, mark), 130);
  EXPECT_EQ(processes_with(mark), 0);
}

TEST(Launcher, SigtermIsForwardedToEveryRankAndNothingIsLeft) {
  const std::string mark = marker();
  EXPECT_EQ(signal_a_running_group(SIGTERM, mark), 128 + SIGTERM);
  EXPECT_EQ(processes_with(mark), 0);
}

// A rank that leaves a process holding its output open does not keep the launcher waiting.
TEST(Launcher, ReturnsWhenEveryRankEndedEvenIfTheirOutputStaysOpen) {
  const std::string mark = marker();
  const auto start = std::chrono::steady_clock::now();
  auto r = test::run_process({TPCOMM_BIN, "run", "-n", "2", "--", "/bin/sh", "-c",
                              "/bin/sh -c 'sleep 30; : " + mark + "' & echo started"},
                             {}, std::chrono::seconds(20));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(lines_with(r.out, "started").size(), 2u) << r.out;
  // SIGKILLed, they are gone a moment later (not the launcher's children: it cannot reap them).
  for (int i = 0; i < 200 && processes_with(mark) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(processes_with(mark), 0) << "what the ranks left running is stopped too";
}

// A closed terminal or ssh session: the launcher used to die without a summary, leaving ranks.
TEST(Launcher, SighupStopsEveryRankAndNothingIsLeft) {
  const std::string mark = marker();
  EXPECT_EQ(signal_a_running_group(SIGHUP, mark), 128 + SIGHUP);
  EXPECT_EQ(processes_with(mark), 0);
}

TEST(Launcher, KeepGoingLetsTheOtherRanksFinishWhereTheDefaultStopsThem) {
  // Rank 1 fails at once; rank 0 would print after a moment.
  const std::vector<std::string> program = {
      "sh", "-c", "if [ $RANK = 1 ]; then exit 5; fi; sleep 1; echo finished $RANK"};
  std::vector<std::string> keep = {TPCOMM_BIN, "run", "-n", "2", "--keep-going", "--"};
  keep.insert(keep.end(), program.begin(), program.end());
  auto kept = test::run_process(keep);
  EXPECT_EQ(kept.exit_code, 5) << kept.err;
  EXPECT_NE(kept.out.find("[0] finished 0"), std::string::npos) << kept.out;
  std::vector<std::string> stop = {TPCOMM_BIN, "run", "-n", "2", "--"};
  stop.insert(stop.end(), program.begin(), program.end());
  auto stopped = test::run_process(stop);
  EXPECT_EQ(stopped.exit_code, 5) << stopped.err;
  EXPECT_EQ(stopped.out.find("finished"), std::string::npos) << stopped.out;
  EXPECT_NE(stopped.err.find("rank 1 exited with status 5"), std::string::npos) << stopped.err;
}

TEST(Launcher, ReportsTheFailingRankAndProgramsThatCannotStart) {
  auto r = test::run_process(
      {TPCOMM_BIN, "run", "-n", "3", "--", "sh", "-c", "exit $((RANK == 1 ? 7 : 0))"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_NE(r.err.find("rank 1 exited with status 7"), std::string::npos) << r.err;
  auto missing = test::run_process({TPCOMM_BIN, "run", "-n", "2", "--", "/nonexistent/program"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("tpcomm run: /nonexistent/program: No such file or directory"),
            std::string::npos)
      << missing.err;
  auto prefixed = test::run_process(
      {TPCOMM_BIN, "run", "-n", "2", "--", "sh", "-c", "echo hi $RANK/$WORLD_SIZE"});
  EXPECT_NE(prefixed.out.find("[0] hi 0/2"), std::string::npos) << prefixed.out;
  EXPECT_NE(prefixed.out.find("[1] hi 1/2"), std::string::npos) << prefixed.out;
  auto timeout =
      test::run_process({TPCOMM_BIN, "run", "-n", "2", "--timeout", "0.5", "--", "sleep", "30"});
  EXPECT_EQ(timeout.exit_code, 124);
  EXPECT_NE(timeout.err.find("the job ran past --timeout 0.5 s"), std::string::npos) << timeout.err;
}

TEST(Launcher, RemovesSegmentsLeftByKilledRanks) {
  auto r = test::run_process({TPCOMM_BIN, "run", "-n", "2", "--", kWorker, "leak_and_die"});
  EXPECT_EQ(r.exit_code, 128 + 9);
  // The first rank to die stops the group, so the other may or may not have made its segment,
  // and may have made it but been stopped before it said so: every segment a rank said it made
  // is among those removed, and none of those removed is left.
  const auto created = lines_with(r.out, "created /tpcomm-test-");
  ASSERT_GE(created.size(), 1u) << r.out;
  const auto removed = lines_with(r.err, "tpcomm run: removed /dev/shm/tpcomm-test-");
  EXPECT_GE(removed.size(), created.size()) << r.err;
  EXPECT_LE(removed.size(), 2u) << r.err;
  for (const auto& line : created) {
    const std::string name = line.substr(line.find("/tpcomm-test-"));
    EXPECT_EQ(lines_with(r.err, "removed /dev/shm" + name + " ").size(), 1u) << name << r.err;
  }
  for (const auto& line : removed) {
    const std::size_t at = line.find("/dev/shm/");
    const std::string path = line.substr(at, line.find(' ', at) - at);
    EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " was removed";
  }
}

TEST(Launcher, SimulatedNodesWithoutPrivilegesExitTwo) {
  if (!root() || access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP()
        << "needs root and setpriv to run the launcher as an unprivileged user; not available here";
  }
  auto r =
      test::run_process({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                         TPCOMM_BIN, "run", "-n", "2", "--nodes", "2", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--nodes needs new UTS, IPC and mount namespaces"), std::string::npos)
      << r.err;
}

TEST(Bench, NcclTestsTableWithChecksAndGlooComparison) {
  char json_path[] = "/tmp/tpcomm_bench_XXXXXX";
  close(mkstemp(json_path));
  // Sizes in nccl-tests' units: rows of 1, 16 and 256 KiB (the JSON's 262144).
  auto r = test::run_process(
      {TPCOMM_BIN, "bench", "-n", "3", "-b", "1K", "-e", "1M", "-f", "16", "--iters", "3",
       "--warmup", "1", "--check", "--compare", "gloo", "--json", json_path},
      {{"TPCOMM_LOG", "debug"}, {"TPCOMM_LOG_SUBSYS", "gloo"}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // The Gloo column is Gloo as PyTorch's users run it (tpcomm's gloo backend, below, carries
  // small calls in its opening exchange).
  EXPECT_EQ(lines_with(r.out + r.err, "every call runs Gloo's own collective").size(), 3u) << r.err;
  for (const char* part : {"#wrong", "backend/algorithm", "shm/one_shot", "shm/two_shot",
                           "# Out of bounds values : 0 OK", "# Avg bus bandwidth", "speed-up"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " missing in\n" << r.out;
  }
  const std::string json = test::read_file(json_path);
  unlink(json_path);
  EXPECT_NE(json.find("\"gloo_time_us\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"bytes\": 262144"), std::string::npos) << json;
  // Every op (the rooted ones from root 0) and type checks out, through the backend forced too.
  for (const char* op : {"all_gather", "reduce_scatter", "gather", "scatter", "reduce"}) {
    auto o = test::run_process(
        {TPCOMM_BIN, "bench", "-n", "2", "--op", op, "--dtype", "bfloat16", "-b", "4096", "-e",
         "262144", "-f", "4", "--iters", "2", "--check", "--backend", "gloo"},
        {{"TPCOMM_LOG", "debug"}, {"TPCOMM_LOG_SUBSYS", "gloo"}});
    EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
    EXPECT_EQ(lines_with(o.out + o.err,
                         "calls of at most 65536 bytes per peer travel in the "
                         "opening exchange")
                  .size(),
              2u)
        << o.err;
    EXPECT_NE(o.out.find("# Out of bounds values : 0 OK"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("gloo/gloo"), std::string::npos) << o.out;
  }
}

// --compare deterministic: the same calls on a second communicator in deterministic mode, both
// checked; on gloo its reductions take the ordered form, which the comparison's route says.
TEST(Bench, CompareDeterministicTimesBothModesAndNamesTheOrderedForm) {
  auto r = test::run_process(
      {TPCOMM_BIN, "bench", "-n",      "2",         "--op", "reduce_scatter", "-b",
       "4K",       "-e",    "64K",     "-f",        "16",   "--iters",        "2",
       "--warmup", "1",     "--check", "--backend", "gloo", "--compare",      "deterministic"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* part : {"# Out of bounds values : 0 OK", "Default against deterministic mode",
                           "gloo/gloo (ordered form)"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " missing in\n" << r.out;
  }
  const auto rows = lines_with(r.out, "(ordered form)");
  EXPECT_EQ(rows.size(), 2u) << r.out;  // 4 KiB and 64 KiB
}

// The header says which CPUs each rank ran on, as the kernel reports them (/proc/self/status).
TEST(Bench, HeaderNamesTheCpusOfEachRank) {
  std::string allowed;
  std::istringstream status(test::read_file("/proc/self/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("Cpus_allowed_list:")) allowed = line.substr(line.find('\t') + 1);
  }
  cpu_set_t usable;
  ASSERT_EQ(sched_getaffinity(0, sizeof(usable), &usable), 0);
  ASSERT_TRUE(CPU_ISSET(0, &usable) && CPU_ISSET(1, &usable)) << "this test needs CPUs 0 and 1";
  char json_path[] = "/tmp/tpcomm_bench_XXXXXX";
  close(mkstemp(json_path));
  std::string out, json;
  auto header = [&](const std::string& bind) {
    // hwloc is told CPUs 0 and 1 are two cores, whatever this machine has beyond them.
    auto r = test::run_process({TPCOMM_BIN, "bench", "-n", "2", "-b", "4K", "-e", "8K", "--iters",
                                "2", "--warmup", "1", "--bind-to", bind, "--json", json_path},
                               {{"HWLOC_SYNTHETIC", "core:2 pu:1"}});
    json = test::read_file(json_path);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    out = r.out;
    const std::size_t at = r.out.find("# CPUs of each rank: ");
    return at == std::string::npos ? r.out : r.out.substr(at, r.out.find('\n', at) - at);
  };
  EXPECT_EQ(header("none"), "# CPUs of each rank: " + allowed + ", every rank (not bound apart)");
  EXPECT_EQ(header("core"), "# CPUs of each rank: 0 | 1");
  unlink(json_path);
  // The --json rows carry the same facts as the header: a row read apart from the table still
  // says where it was measured.
  const auto rows = nlohmann::json::parse(json);
  ASSERT_EQ(rows.size(), 2u) << rows.dump(2);
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("rank_cpus"), nlohmann::json::array({"0", "1"})) << row.dump();
    EXPECT_EQ(row.at("nodes"), 1) << row.dump();
    EXPECT_NE(out.find(", plan " + row.at("plan").get<std::string>() + ", shm reductions " +
                       row.at("shm_reductions").get<std::string>() + "\n"),
              std::string::npos)
        << row.dump() << out;
  }
}

TEST(Bench, PlotIsAPicture) {
  char png[] = "/tmp/tpcomm_plot_XXXXXX.png";
  close(mkstemps(png, 4));
  auto r = test::run_process({TPCOMM_BIN, "bench", "-n", "2", "-b", "4096", "-e", "65536", "-f",
                              "4", "--iters", "2", "--compare", "gloo", "--plot", png});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string data = test::read_file(png);
  unlink(png);
  ASSERT_GT(data.size(), 1000u) << r.out << r.err;
  EXPECT_EQ(data.substr(1, 3), "PNG");
}

// Open MPI leaks at exit by design, and dlcloses its components first, so no suppression can
// name the frames: in sanitizer builds, processes under mpirun do not check for leaks (they still
// check memory errors; every other test checks tpcomm's leaks). Harmless in other builds.
const std::pair<std::string, std::string> kNoLeakCheckUnderMpi = {"ASAN_OPTIONS", "detect_leaks=0"};

TEST(Bench, ComparesWithOpenMpiUnderMpirun) {
  if (!mpi_available()) GTEST_SKIP() << "this build has no MPI or mpirun is missing: not run";
  auto r = test::run_process({TPCOMM_BIN, "bench", "-n", "2", "-b", "4096", "-e", "65536", "-f",
                              "4", "--iters", "3", "--check", "--compare", "mpi"},
                             {kNoLeakCheckUnderMpi,
                              {"RANK", ""},
                              {"WORLD_SIZE", ""},
                              {"MASTER_ADDR", ""},
                              {"MASTER_PORT", ""}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mpi"), std::string::npos) << r.out;
}

// A sweep Open MPI cannot run is refused before mpirun starts: the reason is the one line, not a
// rank's error inside mpirun's abort report. An all-gather moves bytes, so any type compares.
TEST(Bench, AComparisonOpenMpiCannotRunIsRefusedBeforeMpirunAndAllGatherTakesAnyType) {
  if (!mpi_available()) GTEST_SKIP() << "this build has no MPI or mpirun is missing: not run";
  const std::map<std::string, std::string> env = {kNoLeakCheckUnderMpi,
                                                  {"RANK", ""},
                                                  {"WORLD_SIZE", ""},
                                                  {"MASTER_ADDR", ""},
                                                  {"MASTER_PORT", ""}};
  auto fp16 = test::run_process({TPCOMM_BIN, "bench", "-n", "2", "--dtype", "float16", "-b", "4096",
                                 "-e", "4096", "--compare", "mpi"},
                                env);
  EXPECT_EQ(fp16.exit_code, 2);
  EXPECT_EQ(fp16.err,
            "tpcomm: error: --compare mpi: MPI has no float16 reduction (all_gather compares any "
            "type)\n");
  auto bf16_max =
      test::run_process({TPCOMM_BIN, "bench", "-n", "2", "--dtype", "bfloat16", "--redop", "max",
                         "-b", "4096", "-e", "4096", "--compare", "mpi"},
                        env);
  EXPECT_EQ(bf16_max.exit_code, 2);
  EXPECT_NE(bf16_max.err.find("bfloat16 max has no MPI reduction here"), std::string::npos)
      << bf16_max.err;
  EXPECT_EQ(bf16_max.err.find("mpirun"), std::string::npos) << bf16_max.err;
  auto huge = test::run_process({TPCOMM_BIN, "bench", "-n", "2", "-b", "17179869184", "-e",
                                 "17179869184", "--compare", "mpi"},
                                env);
  EXPECT_EQ(huge.exit_code, 2);
  EXPECT_NE(huge.err.find("17179869184 bytes of float32 are more elements than an MPI count"),
            std::string::npos)
      << huge.err;
  auto gather = test::run_process(
      {TPCOMM_BIN, "bench", "-n", "2", "--op", "all_gather", "--dtype", "float16", "-b", "4096",
       "-e", "16384", "-f", "4", "--iters", "3", "--check", "--compare", "mpi"},
      env);
  EXPECT_EQ(gather.exit_code, 0) << gather.out << gather.err;
  EXPECT_NE(gather.out.find("# Out of bounds values : 0 OK"), std::string::npos) << gather.out;
  EXPECT_NE(gather.out.find("speed-up"), std::string::npos) << gather.out;
}

TEST(StandaloneStore, GarbageClientIsDroppedAndAGroupStillRendezvousThroughIt) {
  char log_path[] = "/tmp/tpcomm_store_log_XXXXXX";
  int log_fd = mkstemp(log_path);
  // A free port: let a server pick one, then hand it to tpcomm store.
  std::uint16_t port;
  {
    TcpStoreServer probe("127.0.0.1", 0);
    port = probe.port();
  }
  pid_t store = fork();
  if (store == 0) {
    dup2(log_fd, 2);
    dup2(log_fd, 1);
    execl(TPCOMM_BIN, TPCOMM_BIN, "store", "--bind", "127.0.0.1", "--port",
          std::to_string(port).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(log_fd);
  // Until the store says it listens (a sanitizer build can take seconds to start).
  for (int waited_ms = 0; test::read_file(log_path).find("listening on") == std::string::npos;
       waited_ms += 20) {
    if (waited_ms >= 20000) {
      kill(store, SIGKILL);  // nothing left behind
      waitpid(store, nullptr, 0);
      unlink(log_path);
      FAIL() << "tpcomm store did not start listening within 20 s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {  // A garbage client, through bash's /dev/tcp; it stays until the store drops it, so the
     // store meets the garbage on an open connection however slowly it starts (sanitizers).
    auto c =
        test::run_process({"/bin/bash", "-c",
                           "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) +
                               "; printf 'garbage!garbage!' >&3; timeout 10 cat <&3 >/dev/null"});
    EXPECT_EQ(c.exit_code, 0) << "the store did not drop the garbage client: " << c.err;
  }
  // A two-rank group uses the standalone store (rank 0 finds the port taken and connects).
  std::vector<pid_t> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(spawn({kWorker, "create"}, {{"RANK", std::to_string(r)},
                                                {"WORLD_SIZE", "2"},
                                                {"MASTER_ADDR", "127.0.0.1"},
                                                {"MASTER_PORT", std::to_string(port)}}));
  }
  for (pid_t p : ranks) {
    int status = 0;
    waitpid(p, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  kill(store, SIGINT);
  int status = 0;
  waitpid(store, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string log = test::read_file(log_path);
  unlink(log_path);
  EXPECT_NE(log.find("bad magic"), std::string::npos) << log;
  EXPECT_NE(log.find("the store keeps serving the others"), std::string::npos) << log;
  EXPECT_NE(log.find("tpcomm store: stopping"), std::string::npos) << log;
}

// Under mpirun without MASTER_ADDR the MPI bootstrap carries the rendezvous.
ProcessResult mpirun(int n, std::vector<std::string> args,
                     std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {"/usr/bin/mpirun", "--oversubscribe", "-np", std::to_string(n)};
  for (const auto& [k, v] : env) {
    argv.push_back("-x");
    argv.push_back(k + "=" + v);
  }
  argv.push_back(kWorker);
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run_process(argv, {kNoLeakCheckUnderMpi,
                                  {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                  {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                                  {"MASTER_ADDR", ""},
                                  {"MASTER_PORT", ""},
                                  {"RANK", ""},
                                  {"WORLD_SIZE", ""}});
}

TEST(MpiBootstrap, GroupUnderMpirunIsCorrect) {
  if (!mpi_available())
    GTEST_SKIP() << "this build has no MPI bootstrap or mpirun is missing: not run";
  auto r = mpirun(3, {"correctness"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(lines_with(r.out, "338 checks, 0 failed; nodes=1").size(), 3u) << r.out;
}

TEST(MpiBootstrap, LateRankIsNamedWithinTheDeadline) {
  if (!mpi_available())
    GTEST_SKIP() << "this build has no MPI bootstrap or mpirun is missing: not run";
  const auto start = std::chrono::steady_clock::now();
  auto r =
      mpirun(3, {"create"},
             {{"TEST_LATE_RANK", "2"}, {"TEST_LATE_SECONDS", "4"}, {"TPCOMM_TIMEOUT_MS", "1500"}});
  EXPECT_NE(r.exit_code, 0);
  // At least one of ranks 0 and 1 reports: mpirun ends the job as soon as the first rank exits
  // with an error, and may kill the other before it prints.
  EXPECT_GE(
      lines_with(r.out, "rank 2 did not arrive within 1500 ms (facts exchange, over MPI)").size(),
      1u)
      << r.out << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// A rank that fork()s: the child is refused a call on the inherited communicator, drops it and
// exits normally (static destructors and all); the parent's group goes on, every element checked.
// Over Gloo (its pairs share an epoll set with the child), shm and hier (two simulated nodes).
TEST(Fork, AChildThatExitsNormallyLeavesItsParentsGroupWorking) {
  struct Case {
    std::vector<std::string> run;
    std::map<std::string, std::string> env;
    int ranks;
  };
  std::vector<Case> cases = {{{"-n", "2"}, {{"TPCOMM_DISABLE", "shm"}}, 2}, {{"-n", "2"}, {}, 2}};
  if (root()) {
    cases.push_back({{"-n", "4", "--nodes", "2"}, {}, 4});
  } else {
    std::printf("hier case not run: tpcomm run --nodes needs root to create namespaces\n");
  }
  for (const auto& c : cases) {
    auto r = run_group(c.run, {"fork"}, c.env, marker());
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(lines_with(r.out, "child: refused, dropped it, exiting").size(),
              static_cast<std::size_t>(c.ranks))
        << r.out;
    EXPECT_EQ(lines_with(r.out, "the group works after the child's exit").size(),
              static_cast<std::size_t>(c.ranks))
        << r.out << r.err;
  }
}

}  // namespace
}  // namespace tpcomm
