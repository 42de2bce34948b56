// Admission rules and refusal reasons on the shared topologies and our own scenarios, plus the
// size tables, disabled backends and tuning overrides.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/test_support.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm {
namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

Plan plan_of(const std::string& fixture, Mode mode = Mode::kEager) {
  PlanOptions o;
  o.mode = mode;
  return make_plan(test::load_facts(fixture), o);
}

std::vector<std::string> eligible_names(const OpPlan& p) {
  std::vector<std::string> out;
  for (Backend b : p.eligible) out.emplace_back(to_string(b));
  return out;
}

struct Scenario {
  std::string file;
  std::vector<std::string> eligible;
  std::map<std::string, std::vector<std::string>> reasons;  // backend -> parts of its reason
  std::optional<bool> zero_copy;
};

// The operations custom and multimem serve and read registered inputs of; custom also serves
// all_reduce_rmsnorm (copying its rows); the others (all_to_all, the rooted ones, messages) go
// to nccl wherever it is eligible.
bool staged_op(Op op) {
  return op == Op::kAllReduce || op == Op::kAllGather || op == Op::kReduceScatter;
}
// hier and hier_mpi stage every collective; messages go over gloo's pairs.
bool serves(const std::string& backend, Op op) {
  if (backend == "custom") return staged_op(op) || op == Op::kAllReduceRmsNorm;
  if (backend == "multimem") return staged_op(op);
  if (backend == "hier" || backend == "hier_mpi") return op != Op::kSendRecv;
  return true;
}

std::vector<std::string> eligible_for(const Scenario& s, Op op) {
  std::vector<std::string> out;
  for (const auto& b : s.eligible) {
    if (serves(b, op)) out.push_back(b);
  }
  return out;
}

void check(const Scenario& s) {
  SCOPED_TRACE(s.file);
  Plan plan = plan_of(s.file);
  for (Op op : kAllOps) {
    SCOPED_TRACE(std::string(to_string(op)));
    const OpPlan& p = plan.ops.at(op);
    EXPECT_EQ(eligible_names(p), eligible_for(s, op));
    for (const auto& b : s.eligible) {
      if (serves(b, op)) continue;
      const auto it = p.rejected.find(*from_string<Backend>(b));
      if (it == p.rejected.end()) continue;
      const bool hier = b == "hier" || b == "hier_mpi";
      EXPECT_NE(it->second.find(hier ? "gloo's direct pairs carry" : "nccl carries the others"),
                std::string::npos)
          << it->second;
    }
    for (const auto& [backend, parts] : s.reasons) {
      auto it = p.rejected.find(*from_string<Backend>(backend));
      ASSERT_NE(it, p.rejected.end()) << backend << " must be rejected";
      for (const auto& part : parts) {
        EXPECT_NE(it->second.find(part), std::string::npos)
            << backend << " reason lacks \"" << part << "\": " << it->second;
      }
    }
    if (s.zero_copy) {  // custom's registration: only on the ops custom serves
      EXPECT_EQ(p.zero_copy, *s.zero_copy && staged_op(op));
    }
  }
}

// The statements of each shared fixture's comment.
TEST(PlannerSharedFixtures, Cpu2x2ShmRejectedHierAndGlooEligible) {
  check({"topologies/cpu_2x2.json",
         {"hier", "gloo"},
         {{"shm", {"the ranks span 2 hosts", "cpu-a: ranks 0-1", "cpu-b: ranks 2-3"}},
          {"local", {"world size 4"}},
          {"hier_mpi", {"no rank was bootstrapped through MPI"}}},
         false});
}

// MPI lanes where every rank's facts name the world mpirun started: first at every size of
// every op they stage; without them (disabled, or one rank without MPI) Gloo's lanes, as before.
// Messages go over Gloo's pairs either way.
Backend across_nodes(Op op, Backend staged) {
  return op == Op::kSendRecv ? Backend::kGloo : staged;
}

TEST(PlannerTables, AnMpirunGroupAcrossHostsRunsHierWithMpiLanesAtEverySize) {
  const Plan plan = plan_of("scenarios/cpu_2x2_mpirun.json");
  for (Op op : kAllOps) {
    SCOPED_TRACE(std::string(to_string(op)));
    const auto& t = plan.ops.at(op).table;
    // all_to_all, gather and scatter: hier up to 1 MiB, then Gloo (the built-in rows).
    const bool switches = op == Op::kAllToAll || op == Op::kGather || op == Op::kScatter;
    ASSERT_EQ(t.size(), switches ? 2u : 1u);
    if (switches) {
      EXPECT_EQ(t[0].max_bytes, 1 * MiB);
      EXPECT_EQ(t[1].backend, Backend::kGloo);
    }
    EXPECT_EQ(t[0].backend, across_nodes(op, Backend::kHierMpi));
    EXPECT_EQ(t[0].algorithm,
              t[0].backend == Backend::kGloo ? Algorithm::kGloo : Algorithm::kHierarchical);
  }
  PlanOptions o;
  o.disabled[Backend::kHierMpi] = "TPCOMM_DISABLE";
  const FactsTable facts = test::load_facts("scenarios/cpu_2x2_mpirun.json");
  for (const Plan& p :
       {make_plan(facts, o), plan_of("scenarios/cpu_2x2_one_rank_without_mpi.json")}) {
    for (Op op : kAllOps) {
      const auto& table = p.ops.at(op).table;
      EXPECT_EQ(table.front().backend, across_nodes(op, Backend::kHier));
      const bool switches = op == Op::kAllToAll || op == Op::kGather || op == Op::kScatter;
      EXPECT_EQ(table.back().backend, switches ? Backend::kGloo : across_nodes(op, Backend::kHier));
    }
  }
}

TEST(PlannerSharedFixtures, Gb200Nvl72CustomAndMultimemEligibleNoZeroCopy) {
  check({"topologies/gb200_nvl72_tp16.json", {"custom", "multimem", "nccl"}, {}, false});
  Plan plan = plan_of("topologies/gb200_nvl72_tp16.json");
  EXPECT_NE(plan.ops.at(Op::kAllReduce).zero_copy_reason.find("across nodes"), std::string::npos);
}

TEST(PlannerSharedFixtures, H100x8CustomAndMultimemEligibleForAllReduce) {
  check({"topologies/h100x8_single.json", {"custom", "multimem", "nccl"}, {}, true});
  const Plan plan = plan_of("topologies/h100x8_single.json");
  const auto& table = plan.ops.at(Op::kAllReduce).table;
  ASSERT_GE(table.size(), 2u);
  EXPECT_EQ(table[0].backend, Backend::kCustom);
  EXPECT_EQ(table[0].algorithm, Algorithm::kOneShot);
  EXPECT_EQ(table[0].max_bytes, 256 * KiB);  // vLLM's one-shot limit at W <= 8 on sm90
  EXPECT_EQ(table[1].backend, Backend::kMultimem);
}

TEST(PlannerSharedFixtures, H200x2Tp16RejectsCustomAndMultimemEverywhere) {
  check({"topologies/h200x2_tp16.json",
         {"nccl"},
         {{"custom",
           {"spans 2 nodes (node-a, node-b)", "not one NVLink fabric clique",
            "fabric state not_supported", "fabric_handle false"}},
          {"multimem", {"spans 2 nodes", "fabric state not_supported", "sm below 100"}}},
         false});
  for (const auto& [op, p] : plan_of("topologies/h200x2_tp16.json").ops) {
    ASSERT_EQ(p.table.size(), 1u);
    EXPECT_EQ(p.table[0].backend, Backend::kNccl);
  }
}

TEST(PlannerSharedFixtures, L40sPcie4RejectsCustomAndMultimem) {
  check({"topologies/l40s_pcie4.json",
         {"nccl"},
         {{"custom", {"no NVLink", "only serves a PCIe pair (world size 2), not 4"}},
          {"multimem", {"multicast false", "sm below 90"}}},
         false});
}

TEST(PlannerScenarios, EveryScenarioGivesItsEligibilityAndReasons) {
  const std::vector<Scenario> scenarios = {
      {"scenarios/bridged_islands.json",
       {"nccl"},
       {{"custom",
         {"one node (node-a)", "island 0: ranks 0-3 on host node-a",
          "island 1: ranks 4-7 on host node-a"}},
        {"multimem", {"multicast false", "split over NVLink islands"}}},
       false},
      {"scenarios/pcie_pair_p2p.json",
       {"custom", "nccl"},
       {{"multimem", {"multicast false", "sm below 90", "no NVLink"}}},
       true},
      {"scenarios/pcie_pair_no_p2p.json",
       {"nccl"},
       {{"custom", {"both ranks on host box: p2p false"}}},
       false},
      {"scenarios/nvl72_two_cliques.json",
       {"nccl"},
       {{"custom",
         {"2 different fabric cliques",
          "clique 1: ranks 0-3 on host tray-1 and ranks 4-7 on host tray-2",
          "clique 2: ranks 8-11 on host tray-3 and ranks 12-15 on host tray-4"}},
        {"multimem", {"2 different fabric cliques"}}},
       false},
      {"scenarios/same_clique_other_cluster.json",
       {"nccl"},
       {{"custom",
         {"cluster 8c5e3a1f-2b44-4c1d-9e0a-5d7f6b2c9a10 clique 5: ranks 0-3",
          "cluster 1f0e9d8c-7b6a-4954-8372-6150a4b3c2d1 clique 5: ranks 4-7"}}},
       false},
      {"scenarios/fabric_in_progress.json",
       {"nccl"},
       {{"custom", {"rank 5 on host tray-2: fabric state in_progress"}},
        {"multimem", {"rank 5 on host tray-2: fabric state in_progress"}}},
       false},
      {"scenarios/zero_cluster_uuid.json",
       {"nccl"},
       {{"custom", {"all 8 ranks: cluster_uuid unknown (absent or all zeros)"}}},
       false},
      {"scenarios/one_rank_no_fabric_handle.json",
       {"nccl"},
       {{"custom", {"rank 6 on host tray-2: fabric_handle false"}}},
       false},
      {"scenarios/mixed_sm_cross_node.json",
       {"custom", "nccl"},
       {{"multimem", {"ranks 0-3 on host tray-1: sm below 100"}}},
       false},
      {"scenarios/w16_one_node.json", {"custom", "multimem", "nccl"}, {}, true},
      {"scenarios/w17_one_node.json",
       {"multimem", "nccl"},
       {{"custom", {"world size 17 is above custom's limit of 16 ranks"}}},
       false},
      {"scenarios/w32_cross_node.json",
       {"multimem", "nccl"},
       {{"custom", {"world size 32 is above custom's limit of 16 ranks"}}},
       false},
      {"scenarios/w1_cuda.json",
       {"local", "nccl"},
       {{"custom", {"world size 1"}}, {"multimem", {"world size 1"}}},
       false},
      {"scenarios/cpu_2x2_mpirun.json", {"hier", "hier_mpi", "gloo"}, {}, false},
      {"scenarios/cpu_2x2_one_rank_without_mpi.json",
       {"hier", "gloo"},
       {{"hier_mpi", {"rank 3 on host cpu-b was not bootstrapped through MPI"}}},
       false},
      {"scenarios/cpu_one_host.json",
       {"shm", "gloo"},
       {{"hier", {"all ranks are on one host"}}},
       false},
      {"scenarios/cpu_hosts_one_rank_each.json",
       {"gloo"},
       {{"shm", {"span 3 hosts", "cpu-a: rank 0"}},
        {"hier", {"every host (cpu-a, cpu-b, cpu-c) has one rank"}}},
       false},
      {"scenarios/cpu_w1.json",
       {"local", "gloo"},
       {{"shm", {"world size 1"}}, {"hier", {"world size 1"}}},
       false},
      {"scenarios/zero_copy_vmm_cross_node.json", {"custom", "multimem", "nccl"}, {}, false},
      {"scenarios/zero_copy_one_legacy_rank.json", {"custom", "multimem", "nccl"}, {}, false},
      {"scenarios/fabric_unknown_cross_node.json",
       {"nccl"},
       {{"custom", {"ranks 4-7 on host node-b: fabric info unknown"}}},
       false},
      {"scenarios/nvlink_one_rank_no_p2p.json",
       {"multimem", "nccl"},
       {{"custom", {"rank 3 on host node-a: p2p false"}}},
       false},
      {"scenarios/one_node_two_nvlink_pairs.json",
       {"nccl"},
       {{"custom", {"island 0: ranks 0-1", "island 1: ranks 2-3", "not 4"}}},
       false},
  };
  // Every scenario file is covered (mixed_device_types is the error case below).
  EXPECT_EQ(scenarios.size() + 1, test::fixture_files("scenarios").size());
  for (const auto& s : scenarios) check(s);
}

// Cross-node zero-copy would need user buffers exported as fabric handles, which registration
// does not do (docs/plan.md, "How it is decided"): the plan says no, keeps custom, and a captured
// call's table is the eager one (the larger graph thresholds assume registered buffers).
TEST(PlannerScenarios, AcrossNodesZeroCopyIsRefusedCustomKeptAndGraphPlansLikeEager) {
  for (const char* fixture :
       {"scenarios/zero_copy_one_legacy_rank.json", "scenarios/zero_copy_vmm_cross_node.json"}) {
    PlanOptions graph;
    graph.mode = Mode::kGraph;
    Plan g = make_plan(test::load_facts(fixture), graph);
    Plan e = make_plan(test::load_facts(fixture), PlanOptions{});
    const auto& p = g.ops.at(Op::kAllReduce);
    EXPECT_TRUE(p.is_eligible(Backend::kCustom)) << fixture;
    EXPECT_FALSE(p.zero_copy) << fixture;
    EXPECT_NE(p.zero_copy_reason.find("would need user buffers exported as fabric handles"),
              std::string::npos)
        << p.zero_copy_reason;
    ASSERT_EQ(p.table.size(), e.ops.at(Op::kAllReduce).table.size()) << fixture;
    for (std::size_t i = 0; i < p.table.size(); ++i) {
      EXPECT_EQ(p.table[i].max_bytes, e.ops.at(Op::kAllReduce).table[i].max_bytes) << fixture;
      EXPECT_EQ(p.table[i].backend, e.ops.at(Op::kAllReduce).table[i].backend) << fixture;
    }
  }
}

TEST(PlannerScenarios, MixedDeviceTypesAreAnError) {
  try {
    plan_of("scenarios/mixed_device_types.json");
    FAIL() << "planning must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("mixes device types (cuda: ranks 0-1; cpu: ranks 2-3)"),
              std::string::npos)
        << e.what();
  }
}

TEST(PlannerTables, WorldSizeOneUsesTheLocalCopy) {
  for (const auto* f : {"scenarios/w1_cuda.json", "scenarios/cpu_w1.json"}) {
    for (const auto& [op, p] : plan_of(f).ops) {
      ASSERT_EQ(p.table.size(), 1u);
      EXPECT_EQ(p.table[0].backend, Backend::kLocal);
      EXPECT_EQ(p.table[0].algorithm, Algorithm::kCopy);
    }
  }
}

TEST(PlannerTables, RowForPicksTheRangeContainingTheSize) {
  const Plan plan = plan_of("topologies/h100x8_single.json");
  const auto& p = plan.ops.at(Op::kAllReduce);
  EXPECT_EQ(p.row_for(0).backend, Backend::kCustom);
  EXPECT_EQ(p.row_for(256 * KiB).backend, Backend::kCustom);
  EXPECT_EQ(p.row_for(256 * KiB + 1).backend, Backend::kMultimem);
  EXPECT_EQ(p.row_for(64 * MiB + 1).backend, Backend::kNccl);
  EXPECT_EQ(p.row_for(UINT64_MAX).backend, Backend::kNccl);
}

// Deterministic mode: the switch's reductions do not keep rank order, so multimem leaves the
// reduction tables (custom, then NCCL, whose reductions take the ordered form); it still gathers.
TEST(PlannerTables, DeterministicModeLeavesMultimemOutOfTheReductionTables) {
  PlanOptions o;
  o.deterministic = true;
  const FactsTable facts = test::load_facts("topologies/h100x8_single.json");
  const Plan plan = make_plan(facts, o);
  const Plan usual = make_plan(facts, PlanOptions{});
  for (Op op : {Op::kAllReduce, Op::kReduceScatter, Op::kReduce, Op::kAllReduceRmsNorm}) {
    const auto& p = plan.ops.at(op);
    SCOPED_TRACE(std::string(to_string(op)));
    EXPECT_FALSE(p.is_eligible(Backend::kMultimem));
    ASSERT_TRUE(p.rejected.count(Backend::kMultimem));
    if (usual.ops.at(op).is_eligible(Backend::kMultimem)) {  // else refused for its own reason
      EXPECT_NE(p.rejected.at(Backend::kMultimem).find("deterministic mode"), std::string::npos);
    }
    for (const auto& row : p.table) EXPECT_NE(row.backend, Backend::kMultimem);
  }
  EXPECT_TRUE(usual.ops.at(Op::kAllReduce).is_eligible(Backend::kMultimem));
  const auto& all_reduce = plan.ops.at(Op::kAllReduce);
  EXPECT_EQ(all_reduce.row_for(0).backend, Backend::kCustom);
  EXPECT_EQ(all_reduce.row_for(256 * KiB + 1).backend, Backend::kCustom);  // two-shot
  EXPECT_EQ(all_reduce.row_for(UINT64_MAX).backend, Backend::kNccl);       // the ordered form
  EXPECT_TRUE(plan.ops.at(Op::kAllGather).is_eligible(Backend::kMultimem));
}

TEST(PlannerTables, GraphModeWidensCustomRanges) {
  const Plan eager_plan = plan_of("topologies/h100x8_single.json", Mode::kEager);
  const Plan graph_plan = plan_of("topologies/h100x8_single.json", Mode::kGraph);
  const auto& eager = eager_plan.ops.at(Op::kAllReduce);
  const auto& graph = graph_plan.ops.at(Op::kAllReduce);
  EXPECT_EQ(eager.table[0].max_bytes, 256 * KiB);
  EXPECT_EQ(graph.table[0].max_bytes, 512 * KiB);
}

TEST(PlannerTables, CpuOneHostSwitchesFromOneShotToTwoShot) {
  const Plan plan = plan_of("scenarios/cpu_one_host.json");
  const auto& t = plan.ops.at(Op::kAllReduce).table;
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].backend, Backend::kShm);
  EXPECT_EQ(t[0].algorithm, Algorithm::kOneShot);
  EXPECT_EQ(t[1].algorithm, Algorithm::kTwoShot);
  EXPECT_FALSE(t[1].max_bytes.has_value());
  EXPECT_EQ(plan_of("topologies/cpu_2x2.json").ops.at(Op::kAllReduce).table[0].backend,
            Backend::kHier);
}

TEST(PlannerOptions, DisabledBackendIsRefusedWithItsSourceAndSkippedInTables) {
  PlanOptions o;
  o.disabled[Backend::kCustom] = "TPCOMM_DISABLE";
  Plan plan = make_plan(test::load_facts("topologies/h100x8_single.json"), o);
  const auto& p = plan.ops.at(Op::kAllReduce);
  EXPECT_FALSE(p.is_eligible(Backend::kCustom));
  EXPECT_EQ(p.rejected.at(Backend::kCustom), "disabled by TPCOMM_DISABLE");
  EXPECT_EQ(p.table[0].backend, Backend::kMultimem);  // the next candidate of the small range
  for (const auto& row : p.table) EXPECT_NE(row.backend, Backend::kCustom);
  EXPECT_FALSE(p.zero_copy);
}

TEST(PlannerOptions, DisablingAnIneligibleBackendKeepsTheTopologyReason) {
  PlanOptions o;
  o.disabled[Backend::kCustom] = "--disable";
  Plan plan = make_plan(test::load_facts("topologies/h200x2_tp16.json"), o);
  const std::string& reason = plan.ops.at(Op::kAllReduce).rejected.at(Backend::kCustom);
  EXPECT_EQ(reason.rfind("disabled by --disable; besides: the group spans 2 nodes", 0), 0u)
      << reason;
}

TEST(PlannerOptions, ParseDisabledBackends) {
  EXPECT_EQ(parse_disabled_backends("custom, shm", "--disable"),
            (std::set<Backend>{Backend::kCustom, Backend::kShm}));
  EXPECT_TRUE(parse_disabled_backends("", "--disable").empty());
  try {
    parse_disabled_backends("nccl", "TPCOMM_DISABLE");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("TPCOMM_DISABLE: nccl cannot be disabled"),
              std::string::npos);
  }
  EXPECT_THROW(parse_disabled_backends("gloo", "--disable"), Error);
  try {
    parse_disabled_backends("custom,turbo", "--disable");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"turbo\" is not a backend"), std::string::npos);
  }
}

TEST(PlannerOptions, LocalDisabledAtWorldSizeOneFallsBackToTheEngine) {
  PlanOptions o;
  o.disabled[Backend::kLocal] = "--disable";
  Plan plan = make_plan(test::load_facts("scenarios/cpu_w1.json"), o);
  EXPECT_EQ(plan.ops.at(Op::kAllGather).table[0].backend, Backend::kGloo);
}

TEST(PlannerTuning, OverrideFileReplacesBuiltInRowsForItsKeyAndOpOnly) {
  Tuning overrides = decode_tuning(test::read_file(test::fixture_path("tuning/valid_sm90_w8.json")),
                                   "valid_sm90_w8.json");
  Plan plan = make_plan(test::load_facts("topologies/h100x8_single.json"), {}, overrides);
  const auto& ar = plan.ops.at(Op::kAllReduce).table;
  ASSERT_EQ(ar.size(), 2u);
  EXPECT_EQ(ar[0], (TableRow{1 * MiB, Backend::kCustom, Algorithm::kOneShot, 24, std::nullopt}));
  EXPECT_EQ(ar[1].backend, Backend::kNccl);
  // all_gather is not in the file: the built-in rows serve it.
  Plan builtin = plan_of("topologies/h100x8_single.json");
  EXPECT_EQ(plan.ops.at(Op::kAllGather).table, builtin.ops.at(Op::kAllGather).table);
  EXPECT_NE(plan.tuning.find("valid_sm90_w8.json: cuda sm 90 world size 8 eager"),
            std::string::npos)
      << plan.tuning;
  EXPECT_NE(plan.digest, builtin.digest);
  // The override key does not match graph mode: built-in again.
  PlanOptions graph;
  graph.mode = Mode::kGraph;
  Plan g = make_plan(test::load_facts("topologies/h100x8_single.json"), graph, overrides);
  EXPECT_EQ(g.ops.at(Op::kAllReduce).table[0].max_bytes, 512 * KiB);
}

TEST(PlannerTuning, IneligibleOverrideCandidatesFallThroughToTheEngine) {
  Tuning overrides =
      decode_tuning(test::read_file(test::fixture_path("tuning/valid_sm90_w8.json")), "file");
  FactsTable facts = test::load_facts("topologies/h100x8_single.json");
  for (auto& r : facts.ranks) r.device.p2p = false;  // custom now refused
  Plan plan = make_plan(facts, {}, overrides);
  const auto& ar = plan.ops.at(Op::kAllReduce).table;
  ASSERT_EQ(ar.size(), 1u);
  EXPECT_EQ(ar[0].backend, Backend::kNccl);
}

}  // namespace
}  // namespace tpcomm
