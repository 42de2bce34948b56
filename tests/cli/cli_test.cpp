// The tpcomm binary, run as a user would: exit statuses, the plan JSON contract on every shared
// topology, errors for bad input, topo on this machine and on a fake GPU machine, env.
#include <gtest/gtest.h>

#include <sched.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/test_support.hpp"
#include "tpcomm/facts_json.hpp"

namespace tpcomm {
namespace {

using nlohmann::json;
using test::fixture_path;
using test::ProcessResult;

// No fake GPU unless a test asks for one; no stray settings from the caller's shell.
const std::map<std::string, std::string> kCleanEnv = {
    {"TPCOMM_TUNING", ""}, {"TPCOMM_DISABLE", ""}, {"TPCOMM_LOG", ""}, {"LD_LIBRARY_PATH", ""}};

ProcessResult tpcomm(std::vector<std::string> args, std::map<std::string, std::string> env = {},
                     std::chrono::seconds limit = std::chrono::seconds(120)) {
  args.insert(args.begin(), TPCOMM_BIN);
  for (const auto& [k, v] : kCleanEnv) env.emplace(k, v);
  return test::run_process(args, env, limit);
}

// A tune runs a benchmark per candidate and round: 45 s alone in the sanitizer build, more
// beside another test; the test's own limit (ctest's) is 300 s.
constexpr std::chrono::seconds kTuneLimit{280};

// A field of lscpu's report ("Model name"), the reference for what tpcomm says of this CPU.
std::string lscpu_field(const std::string& name) {
  auto r = test::run_process({"/usr/bin/lscpu"}, {{"LC_ALL", "C"}});
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + ":", 0) != 0) continue;
    const auto start = line.find_first_not_of(" ", name.size() + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

// "AMD EPYC (family 26 model 2)", as lscpu gives it.
std::string cpu_model_from_lscpu() {
  return lscpu_field("Model name") + " (family " + lscpu_field("CPU family") + " model " +
         lscpu_field("Model") + ")";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Cli, VersionAndHelp) {
  auto v = tpcomm({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_TRUE(contains(v.out, "tpcomm 0.1.0")) << v.out;
  EXPECT_TRUE(contains(v.out, "CUDA backends in this build")) << v.out;
  auto h = tpcomm({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  for (const char* cmd : {"plan", "topo", "env"}) EXPECT_TRUE(contains(h.out, cmd)) << h.out;
  for (const char* cmd : {"plan", "topo", "env"}) {
    auto sub = tpcomm({cmd, "--help"});
    EXPECT_EQ(sub.exit_code, 0) << cmd;
    EXPECT_TRUE(contains(sub.out, "--help")) << sub.out;
  }
}

TEST(Cli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(tpcomm({}).exit_code, 2);
  EXPECT_EQ(tpcomm({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(tpcomm({"plan"}).exit_code, 2);
  EXPECT_EQ(tpcomm({"plan", fixture_path("topologies/cpu_2x2.json"), "--mode", "lazy"}).exit_code,
            2);
  EXPECT_EQ(tpcomm({"topo", "--ranks", "0"}).exit_code, 2);
  // Sizes take nccl-tests' units; anything else names the option and the units it takes,
  // before any rank starts.
  for (const char* bad : {"4X", "4.5K", "99999999999G"}) {
    auto size = tpcomm({"bench", "-b", bad});
    EXPECT_EQ(size.exit_code, 2) << bad;
    EXPECT_TRUE(contains(size.err, "--minbytes: ")) << size.err;
    EXPECT_FALSE(contains(size.out, "# tpcomm bench")) << size.out;
  }
  EXPECT_TRUE(contains(tpcomm({"tune", "-o", "/tmp/x.json", "--steps", "4Q"}).err,
                       "q unit not recognized"));
  auto missing = tpcomm({"plan", "/nonexistent/facts.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.err, "cannot read facts file /nonexistent/facts.json: No such file"))
      << missing.err;
}

// The JSON shape of docs/plan.md, "JSON", and the eligibility each shared fixture's comment states.
TEST(Cli, PlanJsonOnEverySharedTopology) {
  const std::map<std::string, std::map<std::string, std::vector<std::string>>> eligible = {
      {"cpu_2x2.json", {{"all_reduce", {"hier", "gloo"}}}},
      {"gb200_nvl72_tp16.json", {{"all_reduce", {"custom", "multimem", "nccl"}}}},
      {"h100x8_single.json", {{"all_reduce", {"custom", "multimem", "nccl"}}}},
      {"h200x2_tp16.json",
       {{"all_reduce", {"nccl"}}, {"all_gather", {"nccl"}}, {"reduce_scatter", {"nccl"}}}},
      {"l40s_pcie4.json", {{"all_reduce", {"nccl"}}}},
  };
  ASSERT_EQ(test::fixture_files("topologies").size(), eligible.size());
  for (const auto& [file, ops] : eligible) {
    SCOPED_TRACE(file);
    auto r = tpcomm({"plan", fixture_path("topologies/" + file), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json plan = json::parse(r.out);
    for (const char* key : {"world_size", "nodes", "ops", "digest"})
      EXPECT_TRUE(plan.contains(key)) << key;
    EXPECT_EQ(plan["digest"].get<std::string>().size(), 16u);
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"}) {
      const json& p = plan["ops"][op];
      for (const char* key : {"eligible", "rejected", "zero_copy", "table"})
        EXPECT_TRUE(p.contains(key)) << op << "." << key;
      EXPECT_TRUE(p["table"].back()["max_bytes"].is_null());
      for (const auto& row : p["table"]) {
        EXPECT_TRUE(row.contains("backend") && row.contains("algorithm"));
      }
    }
    for (const auto& [op, names] : ops) EXPECT_EQ(plan["ops"][op]["eligible"], json(names)) << op;
  }
  json gb200 =
      json::parse(tpcomm({"plan", fixture_path("topologies/gb200_nvl72_tp16.json"), "--json"}).out);
  EXPECT_EQ(gb200["ops"]["all_reduce"]["zero_copy"], false);
  EXPECT_EQ(gb200["world_size"], 16);
  EXPECT_EQ(gb200["nodes"], 4);
  json h200 =
      json::parse(tpcomm({"plan", fixture_path("topologies/h200x2_tp16.json"), "--json"}).out);
  EXPECT_TRUE(
      contains(h200["ops"]["all_gather"]["rejected"]["multimem"], "fabric state not_supported"));
}

TEST(Cli, PlanHumanReportHasTablesAndRefusals) {
  auto r = tpcomm({"plan", fixture_path("topologies/h200x2_tp16.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part :
       {"group   16 cuda ranks on 2 nodes (node-a, node-b), sm 90", "all_reduce", "size", "backend",
        "algorithm", "any size", "refused:", "custom     the group spans 2 nodes"}) {
    EXPECT_TRUE(contains(r.out, part)) << "missing \"" << part << "\" in\n" << r.out;
  }
}

TEST(Cli, EveryMalformedFactsFileExitsTwoNamingFileAndProblem) {
  for (const auto& [file, expected] : test::expectations("malformed")) {
    SCOPED_TRACE(file);
    auto r = tpcomm({"plan", fixture_path("malformed/" + file)});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_TRUE(contains(r.err, file)) << r.err;
    EXPECT_TRUE(contains(r.err, expected)) << r.err;
    EXPECT_TRUE(contains(r.err, "docs/facts.md")) << r.err;
  }
  auto mixed = tpcomm({"plan", fixture_path("scenarios/mixed_device_types.json")});
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_TRUE(contains(mixed.err, "mixes device types")) << mixed.err;
}

TEST(Cli, TuningFileFromOptionOrEnvironment) {
  const std::string facts = fixture_path("topologies/h100x8_single.json");
  const std::string tuning = fixture_path("tuning/valid_sm90_w8.json");
  auto by_option = tpcomm({"plan", facts, "--json", "--tuning", tuning});
  ASSERT_EQ(by_option.exit_code, 0) << by_option.err;
  json plan = json::parse(by_option.out);
  EXPECT_EQ(plan["ops"]["all_reduce"]["table"][0]["max_bytes"], 1048576);
  EXPECT_EQ(plan["ops"]["all_reduce"]["table"][0]["blocks"], 24);
  auto by_env = tpcomm({"plan", facts, "--json"}, {{"TPCOMM_TUNING", tuning}});
  ASSERT_EQ(by_env.exit_code, 0) << by_env.err;
  EXPECT_EQ(json::parse(by_env.out)["digest"], plan["digest"]);
  for (const auto& [file, expected] : test::expectations("tuning")) {
    SCOPED_TRACE(file);
    auto r = tpcomm({"plan", facts, "--tuning", fixture_path("tuning/" + file)});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, expected)) << r.err;
  }
  auto missing = tpcomm({"plan", facts}, {{"TPCOMM_TUNING", "/nonexistent/t.json"}});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.err, "tuning file (TPCOMM_TUNING) /nonexistent/t.json"))
      << missing.err;
}

TEST(Cli, DisableFromOptionAndEnvironment) {
  const std::string facts = fixture_path("topologies/h100x8_single.json");
  json a = json::parse(tpcomm({"plan", facts, "--json", "--disable", "multimem"}).out);
  EXPECT_EQ(a["ops"]["all_reduce"]["rejected"]["multimem"], "disabled by --disable");
  json b = json::parse(tpcomm({"plan", facts, "--json"}, {{"TPCOMM_DISABLE", "custom"}}).out);
  EXPECT_EQ(b["ops"]["all_reduce"]["rejected"]["custom"], "disabled by TPCOMM_DISABLE");
  auto nccl = tpcomm({"plan", facts, "--disable", "nccl"});
  EXPECT_EQ(nccl.exit_code, 2);
  EXPECT_TRUE(contains(nccl.err, "nccl cannot be disabled")) << nccl.err;
}

// `tpcomm run --bind-to core` gives each rank its own CPU (when there are enough of them) and
// `none` leaves every rank the whole set.
TEST(Cli, RunBindsEachRankToACoreOfItsOwn) {
  // The CPU list of each rank (lines "[r] Cpus_allowed_list:\tLIST"); `machine`: an hwloc
  // synthetic description standing in for this machine's cores (HWLOC_SYNTHETIC).
  auto cpus_of_ranks = [](const std::string& bind, int ranks, const std::string& machine = "") {
    std::map<std::string, std::string> env;
    if (!machine.empty()) env["HWLOC_SYNTHETIC"] = machine;
    auto r = tpcomm({"run", "-n", std::to_string(ranks), "--bind-to", bind, "--", "sh", "-c",
                     "grep Cpus_allowed_list /proc/self/status"},
                    env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<int, std::string> lists;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      lists[std::stoi(line.substr(1))] = line.substr(line.find('\t') + 1);
    return lists;
  };
  using Lists = std::map<int, std::string>;
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  const int cpus = CPU_COUNT(&allowed);
  ASSERT_GE(cpus, 2) << "this test needs two usable CPUs";
  ASSERT_TRUE(CPU_ISSET(0, &allowed) && CPU_ISSET(1, &allowed)) << "this test needs CPUs 0 and 1";
  // Two single-thread cores: a core each. Unbound: both the whole list.
  EXPECT_EQ(cpus_of_ranks("core", 2, "core:2 pu:1"), (Lists{{0, "0"}, {1, "1"}}));
  const Lists none = cpus_of_ranks("none", 2);
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(none.at(0), none.at(1));
  // CPUs 0 and 1 as two threads of one core: one rank gets the whole core, two get a thread each.
  EXPECT_EQ(cpus_of_ranks("core", 1, "core:1 pu:2"), (Lists{{0, "0-1"}}));
  EXPECT_EQ(cpus_of_ranks("core", 2, "core:1 pu:2"), (Lists{{0, "0"}, {1, "1"}}));
  // This machine; more ranks than CPUs: nobody is bound, rather than two ranks stacked on one CPU.
  const Lists here = cpus_of_ranks("core", 2);
  ASSERT_EQ(here.size(), 2u);
  EXPECT_NE(here.at(0), here.at(1));
  const Lists over = cpus_of_ranks("core", cpus + 1);
  EXPECT_EQ(std::set<std::string>({over.at(0), over.at(cpus)}).size(), 1u);
  EXPECT_EQ(tpcomm({"run", "-n", "2", "--bind-to", "socket", "--", "true"}).exit_code, 2);
}

// --threads of run and bench: TPCOMM_THREADS for the ranks, each rank bound to an equal share of
// the cores when its team may have more than one thread, a refusal when the share is too small;
// topo's node map shows the same binding and team.
TEST(Cli, ThreadsOptionSetsTheTeamAndSharesTheCores) {
  auto rank0 = [](const std::vector<std::string>& flags, const std::string& machine) {
    std::vector<std::string> args = {"run", "-n", "1", "--bind-to", "core"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(
        args.end(),
        {"--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status; echo \"T=$TPCOMM_THREADS\""});
    return tpcomm(args, {{"HWLOC_SYNTHETIC", machine}, {"TPCOMM_THREADS", ""}});
  };
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  ASSERT_TRUE(CPU_ISSET(0, &allowed) && CPU_ISSET(1, &allowed)) << "this test needs CPUs 0 and 1";
  // One rank, two cores: a team of 2 takes both, a team of 1 one core.
  auto two = rank0({"--threads", "2"}, "core:2 pu:1");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_TRUE(contains(two.out, "Cpus_allowed_list:\t0-1\n")) << two.out;
  EXPECT_TRUE(contains(two.out, "T=2\n")) << two.out;
  auto one = rank0({"--threads", "1"}, "core:2 pu:1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(contains(one.out, "Cpus_allowed_list:\t0\n")) << one.out;
  EXPECT_TRUE(contains(one.out, "T=1\n")) << one.out;
  // Two ranks on two cores leave a core each: two threads each is refused, saying what fits.
  auto over = tpcomm({"run", "-n", "2", "--bind-to", "core", "--threads", "2", "--", "true"},
                     {{"HWLOC_SYNTHETIC", "core:2 pu:1"}});
  EXPECT_EQ(over.exit_code, 2);
  EXPECT_TRUE(contains(over.err,
                       "--threads 2: 2 ranks on 2 cores leave each rank 1 core; ask for "
                       "at most 1, or pass --bind-to none"))
      << over.err;
  auto bench =
      tpcomm({"bench", "-n", "2", "--threads", "3", "--bind-to", "core", "-b", "4K", "-e", "4K"},
             {{"HWLOC_SYNTHETIC", "core:2 pu:1"}});
  EXPECT_EQ(bench.exit_code, 2) << bench.out << bench.err;
  // topo: the node map of two ranks, a core each, one thread each.
  auto topo = tpcomm({"topo", "--ranks", "2"}, {{"HWLOC_SYNTHETIC", "core:2 pu:1"}});
  ASSERT_EQ(topo.exit_code, 0) << topo.err;
  EXPECT_TRUE(contains(topo.out,
                       "group   2 ranks with --bind-to core, TPCOMM_THREADS=0:\n"
                       "  rank 0: cpus 0, pages on node 0, team of 1 thread"))
      << topo.out;
  EXPECT_TRUE(contains(topo.out, "  rank 1: cpus 1, pages on node 0, team of 1 thread"))
      << topo.out;
  auto topo1 = tpcomm({"topo", "--ranks", "1"}, {{"HWLOC_SYNTHETIC", "core:2 pu:1"}});
  EXPECT_TRUE(contains(topo1.out, "  rank 0: cpus 0-1, pages on node 0, team of 2 threads"))
      << topo1.out;
}

TEST(Cli, TopoWithoutGpuPrintsCpuFactsAndSaysWhy) {
  auto r = tpcomm({"topo"}, {{"TPCOMM_LOG", "info"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "host ")) << r.out;
  EXPECT_TRUE(contains(r.out, "\ncpu     " + cpu_model_from_lscpu() + ", numa node")) << r.out;
  EXPECT_TRUE(contains(r.out, "cuda    the CUDA driver library libcuda.so.1 could not be loaded"))
      << r.out;
  EXPECT_TRUE(contains(r.err, "[tpcomm info probe] no CUDA device")) << r.err;
  // The reduction variant in use, from /proc/cpuinfo's flags (not from tpcomm's own check).
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  auto has = [&](std::initializer_list<const char*> all) {
    for (const char* f : all) {
      if (!flags.count(f)) return false;
    }
    return true;
  };
  const bool avx512 =
      has({"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd", "avx2", "f16c"});
  const char* best = avx512 && has({"avx512_bf16"})         ? "avx512bf16"
                     : avx512                               ? "avx512"
                     : has({"avx2", "f16c", "fma", "bmi2"}) ? "avx2"
                                                            : "baseline";
  EXPECT_TRUE(contains(r.out, std::string("kernels shm reductions: ") + best + " (this CPU runs"))
      << r.out;
  // TPCOMM_CPU_KERNELS picks another variant (every x86-64 CPU runs the baseline).
  auto baseline = tpcomm({"topo"}, {{"TPCOMM_CPU_KERNELS", "baseline"}});
  EXPECT_TRUE(contains(baseline.out, "kernels shm reductions: baseline (this CPU runs"))
      << baseline.out;
  auto quiet = tpcomm({"topo"});
  EXPECT_FALSE(contains(quiet.err, "[tpcomm info")) << "info must be off by default: " << quiet.err;
  // The cores --bind-to core hands out, each with its hardware threads (hwloc's view, here a
  // synthetic machine: CPUs 0 and 1 as one core's two threads, then as two cores).
  auto smt = tpcomm({"topo"}, {{"HWLOC_SYNTHETIC", "core:1 pu:2"}});
  EXPECT_TRUE(contains(smt.out, "\ncores   1 usable, 2 hardware threads: 0,1\n")) << smt.out;
  auto two = tpcomm({"topo"}, {{"HWLOC_SYNTHETIC", "core:2 pu:1"}});
  EXPECT_TRUE(contains(two.out, "\ncores   2 usable, a hardware thread each: 0 | 1\n")) << two.out;
}

TEST(Cli, TopoJsonIsAFactsFileThatPlanReads) {
  auto r = tpcomm({"topo", "--json", "--ranks", "3", "--device", "cpu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  FactsTable facts = decode_facts(r.out);
  ASSERT_EQ(facts.ranks.size(), 3u);
  char path[] = "/tmp/tpcomm_topo_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, r.out.data(), r.out.size()), static_cast<ssize_t>(r.out.size()));
  close(fd);
  auto plan = tpcomm({"plan", path, "--json"});
  unlink(path);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(json::parse(plan.out)["ops"]["all_reduce"]["eligible"], json({"shm", "gloo"}));
  auto cuda = tpcomm({"topo", "--json", "--device", "cuda"});
  EXPECT_EQ(cuda.exit_code, 2);
  EXPECT_TRUE(contains(cuda.err, "no CUDA device on this machine")) << cuda.err;
}

// A CPU group of two on this machine: the plan names shm's steps and single-copy reads, in the
// text (the blocks/step column) and the JSON (step_bytes), as the built-in table sets them.
TEST(Cli, PlanOfTwoCpuRanksShowsShmStepsAndSingleCopy) {
  auto topo = tpcomm({"topo", "--json", "--ranks", "2", "--device", "cpu"});
  ASSERT_EQ(topo.exit_code, 0) << topo.err;
  char path[] = "/tmp/tpcomm_topo_XXXXXX";
  close(mkstemp(path));
  std::ofstream(path) << topo.out;
  auto text = tpcomm({"plan", path});
  auto js = tpcomm({"plan", path, "--json"});
  unlink(path);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out,
                       "  size           backend    algorithm     blocks/step\n"
                       "  up to 256 KiB  shm        one_shot      -\n"
                       "  above 256 KiB  shm        one_shot      128 KiB\n"))
      << text.out;
  EXPECT_TRUE(contains(text.out, "  above 64 KiB  shm        single_copy   -\n")) << text.out;
  const json table = json::parse(js.out)["ops"]["all_reduce"]["table"];
  ASSERT_EQ(table.size(), 2u) << js.out;
  EXPECT_FALSE(table[0].contains("step_bytes")) << js.out;
  EXPECT_EQ(table[1]["step_bytes"], 128 * 1024) << js.out;
}

TEST(Cli, EnvListsEveryVariableAndFlagsInvalidValues) {
  auto r = tpcomm({"env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name :
       {"TPCOMM_LOG", "TPCOMM_LOG_SUBSYS", "TPCOMM_TIMEOUT_MS", "TPCOMM_TUNING",
        "TPCOMM_DUMP_FACTS", "TPCOMM_CHECK", "TPCOMM_DISABLE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
        "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK"}) {
    EXPECT_TRUE(contains(r.out, name)) << name;
  }
  EXPECT_TRUE(contains(r.out, "(unset: 60000)")) << r.out;
  auto bad = tpcomm({"env"}, {{"TPCOMM_TIMEOUT_MS", "soon"}});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.out, "soon  INVALID: expected an integer")) << bad.out;
  // A fault specification is checked with the parser that will read it (it used to pass).
  auto fault = tpcomm({"env"}, {{"TPCOMM_FAULT", "facts:explode@1"}});
  EXPECT_EQ(fault.exit_code, 2);
  EXPECT_TRUE(contains(fault.out,
                       "facts:explode@1  INVALID: TPCOMM_FAULT item \"facts:explode@1\": "
                       "unknown action"))
      << fault.out;
  EXPECT_EQ(tpcomm({"env"}, {{"TPCOMM_FAULT", "call:stall@0#5"}}).exit_code, 0);
}

// The real dlopen path of the probe against fake libcuda.so.1 / libnvidia-ml.so.1.
class FakeGpu : public ::testing::Test {
 protected:
  static ProcessResult topo(std::map<std::string, std::string> env, std::vector<std::string> args,
                            const std::string& libs = std::string(FAKE_DRIVER_DIR) +
                                                      "/cuda:" + FAKE_DRIVER_DIR + "/nvml") {
    env["LD_LIBRARY_PATH"] = libs;
    args.insert(args.begin(), "topo");
    args.insert(args.begin(), TPCOMM_BIN);
    for (const auto& [k, v] : kCleanEnv) env.emplace(k, v);
    return test::run_process(args, env);
  }
  static std::string plan_of(const std::string& facts_json) {
    char path[] = "/tmp/tpcomm_fake_XXXXXX";
    int fd = mkstemp(path);
    EXPECT_EQ(write(fd, facts_json.data(), facts_json.size()),
              static_cast<ssize_t>(facts_json.size()));
    close(fd);
    auto r = tpcomm({"plan", path, "--json"});
    unlink(path);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
};

TEST_F(FakeGpu, NvSwitchNodeOfEightH100s) {
  auto r = topo({{"FAKE_GPU_COUNT", "8"}, {"FAKE_GPU_SM", "90"}, {"FAKE_GPU_LINKS", "switch"}},
                {"--json", "--ranks", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  FactsTable facts = decode_facts(r.out);
  ASSERT_EQ(facts.ranks.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const auto& d = facts.ranks[i].device;
    EXPECT_EQ(d.type, DeviceType::kCuda);
    EXPECT_EQ(d.index, i);
    EXPECT_EQ(d.sm, 90);
    EXPECT_EQ(d.nvlink_island, 0);
    EXPECT_TRUE(d.p2p && d.multicast && d.vmm);
    EXPECT_FALSE(d.fabric_handle);
    ASSERT_TRUE(d.fabric.has_value());
    EXPECT_EQ(d.fabric->state, FabricState::kNotSupported);
  }
  json plan = json::parse(plan_of(r.out));
  EXPECT_EQ(plan["ops"]["all_reduce"]["eligible"], json({"custom", "multimem", "nccl"}));
  auto human = topo({{"FAKE_GPU_COUNT", "8"}}, {});
  EXPECT_TRUE(contains(human.out, "cuda    8 CUDA devices, driver API 13.0")) << human.out;
  EXPECT_TRUE(contains(human.out, "NVML: 8 of 8 GPUs with active NVLink")) << human.out;
}

TEST_F(FakeGpu, BridgedPairsMakeIslandsThatRefuseCustom) {
  auto r = topo({{"FAKE_GPU_COUNT", "4"}, {"FAKE_GPU_SM", "86"}, {"FAKE_GPU_LINKS", "pairs"}},
                {"--json", "--ranks", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  FactsTable facts = decode_facts(r.out);
  std::vector<std::optional<int>> islands;
  for (const auto& rank : facts.ranks) islands.push_back(rank.device.nvlink_island);
  EXPECT_EQ(islands, (std::vector<std::optional<int>>{0, 0, 1, 1}));
  json plan = json::parse(plan_of(r.out));
  EXPECT_EQ(plan["ops"]["all_reduce"]["eligible"], json({"nccl"}));
  EXPECT_TRUE(
      contains(plan["ops"]["all_reduce"]["rejected"]["custom"], "split over NVLink islands"));
}

TEST_F(FakeGpu, FabricCliqueAndAllZeroUuid) {
  auto r = topo({{"FAKE_GPU_COUNT", "4"}, {"FAKE_GPU_SM", "100"}, {"FAKE_GPU_FABRIC", "32766"}},
                {"--json", "--ranks", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  FactsTable facts = decode_facts(r.out);
  const auto& f = facts.ranks[0].device.fabric;
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->state, FabricState::kCompleted);
  EXPECT_EQ(f->cluster_uuid, "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  EXPECT_EQ(f->clique_id, 32766);
  EXPECT_TRUE(facts.ranks[0].device.fabric_handle);
  auto zero =
      topo({{"FAKE_GPU_COUNT", "2"}, {"FAKE_GPU_FABRIC", "zero"}}, {"--json", "--ranks", "2"});
  FactsTable z = decode_facts(zero.out);
  EXPECT_FALSE(z.ranks[0].device.fabric->has_known_cluster());
  auto busy = topo({{"FAKE_GPU_COUNT", "2"}, {"FAKE_GPU_FABRIC", "in_progress"}},
                   {"--json", "--ranks", "2"});
  EXPECT_EQ(decode_facts(busy.out).ranks[1].device.fabric->state, FabricState::kInProgress);
}

TEST_F(FakeGpu, DriverWithoutDevicesAndMissingNvml) {
  auto none = topo({{"FAKE_GPU_COUNT", "0"}}, {});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_TRUE(contains(none.out, "cuInit failed: CUDA_ERROR_NO_DEVICE 100")) << none.out;
  auto no_nvml = topo({{"FAKE_GPU_COUNT", "2"}}, {"--json", "--ranks", "2"},
                      std::string(FAKE_DRIVER_DIR) + "/cuda");
  ASSERT_EQ(no_nvml.exit_code, 0) << no_nvml.err;
  FactsTable facts = decode_facts(no_nvml.out);
  EXPECT_FALSE(facts.ranks[0].device.nvlink_island.has_value());
  EXPECT_FALSE(facts.ranks[0].device.fabric.has_value());
  EXPECT_TRUE(contains(*facts.comment, "libnvidia-ml.so.1 could not be loaded")) << *facts.comment;
  auto no_p2p = topo({{"FAKE_GPU_COUNT", "2"}, {"FAKE_GPU_P2P", "0"}}, {"--json", "--ranks", "2"});
  EXPECT_FALSE(decode_facts(no_p2p.out).ranks[0].device.p2p);
}

}  // namespace
}  // namespace tpcomm

namespace tpcomm {
namespace {

// The rows of one op's table in tpcomm tune's output: size -> (times per candidate, chosen).
struct TuneTable {
  std::vector<std::string> candidates;
  std::map<std::uint64_t, std::pair<std::vector<double>, std::string>> rows;
  std::string switch_points;  // the line after the rows
};

TuneTable parse_tune_table(const std::string& out, const std::string& op) {
  TuneTable t;
  std::istringstream in(out.substr(out.find("\n" + op + " float32 on 2 ranks")));
  std::string line;
  std::getline(in, line);  // blank
  std::getline(in, line);  // title
  std::getline(in, line);  // header: size, candidates..., chosen, gain vs built-in
  std::istringstream header(line);
  for (std::string w; header >> w;) {
    if (w.find('/') != std::string::npos) t.candidates.push_back(w);
  }
  while (std::getline(in, line) && line.rfind("switch points:", 0) != 0) {
    std::istringstream row(line);
    std::uint64_t size = 0;
    row >> size;
    std::vector<double> times(t.candidates.size());
    for (auto& v : times) row >> v;
    std::string chosen;
    row >> chosen;
    t.rows[size] = {times, chosen};
  }
  t.switch_points = line;
  return t;
}

TEST(Cli, TuneTimesEveryCandidateChoosesTheFastestAndWritesAFilePlanUses) {
  char dir[] = "/tmp/tpcomm_tune_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/tuned.json";
  // A 16 KiB step: the same run as the lane at 4 and 16 KiB (not to be chosen there), its own
  // at 64 and 256 KiB.
  // Sizes as nccl-tests writes them (4K = 4096): the rows below are 4, 16, 64 and 256 KiB.
  auto r = tpcomm({"tune", "-n", "2", "--ops", "all_reduce,all_gather", "-b", "4K", "-e", "256k",
                   "-f", "4", "--rounds", "2", "--steps", "16KiB", "-o", file},
                  {}, kTuneLimit);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("all_reduce float32 on 2 ranks: time per call (us, best of 2 rounds)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("tune: 2 ranks, all_gather via shm/single_copy (round 2 of 2)"),
            std::string::npos)
      << r.err;
  // The team's threshold: measured where each of the 2 ranks has 2 cores or more, else said why.
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (CPU_COUNT(&allowed) < 4) {
    EXPECT_TRUE(contains(r.out, "team: not measured (2 ranks on ")) << r.out;
    EXPECT_TRUE(contains(r.out,
                         "have one thread each): team_min_bytes stays the default, 262144 "
                         "bytes"))
        << r.out;
  } else {
    EXPECT_TRUE(contains(r.out, "team_min_bytes: ")) << r.out;
  }
  for (const char* op : {"all_reduce", "all_gather"}) {
    const TuneTable t = parse_tune_table(r.out, op);
    EXPECT_TRUE(std::find(t.candidates.begin(), t.candidates.end(), "shm/one_shot") !=
                t.candidates.end())
        << r.out;
    ASSERT_EQ(t.rows.size(), 4u) << op << "\n" << r.out;  // 4, 16, 64, 256 KiB
    if (std::string(op) == "all_reduce") {
      EXPECT_TRUE(std::find(t.candidates.begin(), t.candidates.end(), "shm/one_shot/16K") !=
                  t.candidates.end())
          << r.out;
    }
    // The switch points name the largest size's choice last, without a limit.
    const std::string last = t.rows.rbegin()->second.second;
    const std::string open_end =
        t.switch_points.find(',') == std::string::npos ? " at every size" : " above";
    EXPECT_TRUE(t.switch_points.ends_with(" " + last + open_end)) << t.switch_points;
    for (const auto& [size, row] : t.rows) {
      const auto& [times, chosen] = row;
      // A candidate whose step holds the whole message runs as its sibling without one does:
      // it is not a choice at that size.
      auto eligible = [&, size = size](std::size_t i) {
        const std::string& name = t.candidates[i];
        return name.find("/16K") == std::string::npos || size > 16384;
      };
      std::size_t fastest = t.candidates.size();
      for (std::size_t i = 0; i < times.size(); ++i) {
        if (eligible(i) && (fastest == t.candidates.size() || times[i] < times[fastest])) {
          fastest = i;
        }
      }
      const auto at = std::find(t.candidates.begin(), t.candidates.end(), chosen);
      ASSERT_NE(at, t.candidates.end()) << chosen;
      const auto chosen_index = static_cast<std::size_t>(at - t.candidates.begin());
      EXPECT_TRUE(eligible(chosen_index)) << op << " " << size << ": chose " << chosen;
      // The fastest, or a built-in choice within 5% of it (noise must not move switch points);
      // the table prints hundredths of a microsecond, so the check allows their rounding.
      EXPECT_LE(times[chosen_index] * 0.95, times[fastest] + 0.01)
          << op << " " << size << ": chose " << chosen << "\n"
          << r.out;
    }
  }
  // The file is a tuning file that plan reads, and its rows are what the plan uses.
  auto topo = tpcomm({"topo", "--json", "--ranks", "2", "--device", "cpu"});
  const std::string facts = std::string(dir) + "/facts.json";
  std::ofstream(facts) << topo.out;
  auto plan = tpcomm({"plan", "--tuning", file, "--json", facts});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const auto tuned = json::parse(test::read_file(file));
  const auto planned = json::parse(plan.out);
  EXPECT_EQ(planned["ops"]["all_gather"]["table"].size(),
            tuned["entries"][0]["ops"]["all_gather"].size())
      << plan.out;
  // The file was written beside itself and renamed: nothing else is left in the folder.
  std::vector<std::string> left;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    left.push_back(f.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"facts.json", "tuned.json"}));
  std::filesystem::remove_all(dir);
}

// Several group sizes give one file with an entry each, and a plan of either size uses its own.
TEST(Cli, TuneForSeveralGroupSizesWritesAnEntryForEach) {
  char dir[] = "/tmp/tpcomm_tune_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/tuned.json";
  auto r = tpcomm({"tune", "-n", "2,3", "--ops", "reduce_scatter", "-b", "12288", "-e", "12288",
                   "--rounds", "1", "-o", file},
                  {}, kTuneLimit);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* title :
       {"reduce_scatter float32 on 2 ranks", "reduce_scatter float32 on 3 ranks"}) {
    EXPECT_TRUE(contains(r.out, title)) << r.out;
  }
  // The output and the file say which machine the times are from: CPU, kernels and cores.
  const std::string topo_out = tpcomm({"topo"}).out;
  const auto kernels_at = topo_out.find("kernels shm reductions: ");
  ASSERT_NE(kernels_at, std::string::npos) << topo_out;
  const std::string kernels =
      topo_out.substr(kernels_at + 24, topo_out.find(' ', kernels_at + 24) - (kernels_at + 24));
  const std::string machine = cpu_model_from_lscpu() + ", shm kernels " + kernels + ", ";
  EXPECT_EQ(r.out.rfind("tpcomm tune on " + machine, 0), 0u) << r.out;
  const auto tuned = json::parse(test::read_file(file));
  EXPECT_TRUE(
      contains(tuned["comment"].get<std::string>(), "measured by tpcomm tune on " + machine))
      << tuned.dump();
  ASSERT_EQ(tuned["entries"].size(), 2u) << tuned.dump();
  for (int i = 0; i < 2; ++i) {
    const auto& e = tuned["entries"][i];
    EXPECT_EQ(e["world_size"], 2 + i);
    EXPECT_EQ(e["ops"]["reduce_scatter"].size(), 1u) << e.dump();
    // The plan of a group of that size names the file's entry as its tuning.
    auto topo = tpcomm({"topo", "--json", "--ranks", std::to_string(2 + i), "--device", "cpu"});
    const std::string facts = std::string(dir) + "/facts.json";
    std::ofstream(facts) << topo.out;
    auto plan = tpcomm({"plan", "--tuning", file, facts});
    EXPECT_TRUE(contains(plan.out, file + ": cpu world size " + std::to_string(2 + i))) << plan.out;
  }
  auto twice = tpcomm({"tune", "-n", "2,2", "-o", file});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_TRUE(contains(twice.err, "-n: 2 ranks given twice")) << twice.err;
  std::filesystem::remove_all(dir);
}

// An output tune cannot write fails at once, before minutes of measuring, and says why.
TEST(Cli, TuneRefusesAnOutputItCannotWriteBeforeMeasuring) {
  auto missing = tpcomm({"tune", "-o", "/nonexistent/tuned.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.err,
                       "tune: cannot write /nonexistent/tuned.json: No such file or directory"))
      << missing.err;
  EXPECT_FALSE(contains(missing.err, " via ")) << missing.err;  // no candidate was timed
  auto folder = tpcomm({"tune", "-o", "/tmp"});
  EXPECT_EQ(folder.exit_code, 2);
  EXPECT_TRUE(contains(folder.err, "tune: cannot write /tmp: it is a folder")) << folder.err;
  auto empty = tpcomm({"tune", "-o", ""});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_TRUE(contains(empty.err, "tune: -o: the output path is empty")) << empty.err;
}

}  // namespace
}  // namespace tpcomm
